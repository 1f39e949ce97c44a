// apache-arrow as callers import it (its ES modules), named one by one so that a bundler keeps
// only what ArrowCodec uses (the page's Parquet writer stays small).
import {
  AsyncByteQueue,
  Bool,
  Field,
  Float32,
  Float64,
  Int32,
  List,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  Table,
  Utf8,
  makeData,
} from "apache-arrow";
import { ArrowCodec, type ArrowLibrary } from "./arrow.js";

const modules: ArrowLibrary = {
  AsyncByteQueue,
  Bool,
  Field,
  Float32,
  Float64,
  Int32,
  List,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  Table,
  Utf8,
  makeData,
};

/** The codec over apache-arrow's ES modules (the library's API). */
export const moduleCodec = new ArrowCodec(modules);
