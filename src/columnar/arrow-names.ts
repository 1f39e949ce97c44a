// What ArrowCodec uses of apache-arrow, named once: imported as a namespace, this module's
// object holds only these, so a bundler keeps only these (the page's Parquet writer stays small).
export {
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
