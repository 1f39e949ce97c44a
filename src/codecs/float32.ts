// float32 values as text: the shortest decimal that reads back as the same float32.

/**
 * Shortest correctly rounded decimal text that reads back (through Math.fround) as the same
 * float32, -0 included. (At a few powers of two a shorter text that is not the correctly rounded
 * one also reads back; like the WASM writer, this keeps the correctly rounded one.)
 */
export function formatFloat32(x: number): string {
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  if (!Number.isFinite(x) || Math.fround(x) !== x) return String(x); // not a float32 (no text reads back as it)
  // The fewest significant digits that read back, by bisection over 1..9 (9 always do). Reading
  // back is monotonic in the digit count: the correctly rounded p-digit text is also a candidate
  // at p+1 digits, so the p+1-digit one is at least as close. (A test checks it against trying
  // 1, 2, 3, ... in turn; this takes ~3 toPrecision calls instead of ~8 for a typical logprob.)
  let low = 1;
  let high = 9;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (Math.fround(Number(x.toPrecision(middle))) === x) high = middle;
    else low = middle + 1;
  }
  return String(Number(x.toPrecision(low)));
}
