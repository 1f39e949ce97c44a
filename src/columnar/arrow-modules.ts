// The codec over apache-arrow as callers import it (its ES modules), for the library's API: the
// tables it hands out are of their build.
import * as names from "./arrow-names.js";
import { ArrowCodec } from "./arrow.js";

export const moduleCodec = new ArrowCodec(names);
