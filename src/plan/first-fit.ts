// First fit in O(log n) an item: which bin each item goes to when each, in turn, takes the first
// bin (in the order bins were opened) with room left for it, or opens a new one. A segment tree
// over the bins' remaining room finds that bin; the bins not yet opened have all their room, so
// the first of them is where a new bin opens.

/**
 * The bin of each item (by index into `sizes`, taken in that order) for bins of `room` each: bins
 * are numbered in the order they open. An item larger than `room` opens a bin of its own, which
 * no later item fits.
 */
export function firstFit(sizes: ArrayLike<number>, room: number): Int32Array {
  const n = sizes.length;
  const bins = new Int32Array(n);
  let leaves = 1;
  while (leaves < n) leaves *= 2;
  // best[1] is the root; best[leaves + b] is bin b's room left; a node's, the most of its two.
  const best = new Float64Array(2 * leaves).fill(room);
  let opened = 0;
  for (let i = 0; i < n; i++) {
    const size = sizes[i];
    let bin: number;
    if (best[1] >= size) {
      let node = 1;
      while (node < leaves) node = best[2 * node] >= size ? 2 * node : 2 * node + 1;
      bin = node - leaves;
    } else bin = opened; // too large for any bin, even an empty one
    if (bin === opened) opened++;
    bins[i] = bin;
    let node = leaves + bin;
    best[node] -= size;
    for (node >>= 1; node >= 1; node >>= 1) best[node] = Math.max(best[2 * node], best[2 * node + 1]);
  }
  return bins;
}
