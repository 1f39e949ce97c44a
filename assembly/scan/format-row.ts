// The number-heavy parts of a row line: token ids, logprobs, and the loss mask (base64 or 0/1
// list). The host stages input values at a source address and collects the text at `at`.
import { formatF32 } from "./format-float";
import { writeU32 } from "./digits";

const BASE64 = memory.data<u8>([
  65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90,
  97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117,
  118, 119, 120, 121, 122, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 43, 47,
]);

/** `count` i32 values at `source` as `a,b,c` (a leading comma when `comma`); returns the end. */
export function formatInts(source: usize, count: i32, at: usize, comma: bool): usize {
  for (let i = 0; i < count; i++) {
    if (comma || i > 0) store<u8>(at++, 0x2c);
    const v = load<i32>(source + (<usize>i << 2));
    if (v < 0) {
      store<u8>(at++, 0x2d);
      at = writeU32(at, <u32>-v);
    } else {
      at = writeU32(at, <u32>v);
    }
  }
  return at;
}

/** `count` f32 values at `source` as formatFloat32 texts joined by commas. At most 25 bytes each. */
export function formatFloats(source: usize, count: i32, at: usize, comma: bool): usize {
  for (let i = 0; i < count; i++) {
    if (comma || i > 0) store<u8>(at++, 0x2c);
    at = formatF32(load<f32>(source + (<usize>i << 2)), at);
  }
  return at;
}

/** Standard base64 of `length` bytes (padding only when length % 3 != 0); returns the end. */
export function base64(source: usize, length: i32, at: usize): usize {
  let i = 0;
  for (; i + 2 < length; i += 3) {
    const n = (<u32>load<u8>(source + i) << 16) | (<u32>load<u8>(source + i + 1) << 8) | load<u8>(source + i + 2);
    store<u8>(at, load<u8>(BASE64 + (n >> 18)));
    store<u8>(at + 1, load<u8>(BASE64 + ((n >> 12) & 63)));
    store<u8>(at + 2, load<u8>(BASE64 + ((n >> 6) & 63)));
    store<u8>(at + 3, load<u8>(BASE64 + (n & 63)));
    at += 4;
  }
  const rest = length - i;
  if (rest == 1) {
    const n = <u32>load<u8>(source + i) << 16;
    store<u8>(at, load<u8>(BASE64 + (n >> 18)));
    store<u8>(at + 1, load<u8>(BASE64 + ((n >> 12) & 63)));
    store<u16>(at + 2, 0x3d3d);
    at += 4;
  } else if (rest == 2) {
    const n = (<u32>load<u8>(source + i) << 16) | (<u32>load<u8>(source + i + 1) << 8);
    store<u8>(at, load<u8>(BASE64 + (n >> 18)));
    store<u8>(at + 1, load<u8>(BASE64 + ((n >> 12) & 63)));
    store<u8>(at + 2, load<u8>(BASE64 + ((n >> 6) & 63)));
    store<u8>(at + 3, 0x3d);
    at += 4;
  }
  return at;
}

/** Bits [first, first + count) of the bitset at `source` as `0,1,...` (leading comma when `comma`). */
export function maskInts(source: usize, first: i32, count: i32, at: usize, comma: bool): usize {
  for (let i = 0; i < count; i++) {
    const bit = first + i;
    if (comma || i > 0) store<u8>(at++, 0x2c);
    store<u8>(at++, <u8>(0x30 + ((<u32>load<u8>(source + (bit >> 3)) >> <u32>(bit & 7)) & 1)));
  }
  return at;
}
