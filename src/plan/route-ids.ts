// Route ids (SPEC v4 "Linking", routes clause): every distinct L × K block of expert ids a rollout
// gives gets one small integer, so that the cores compare a token's route as they compare its id —
// one i32, equal exactly when the blocks are equal (the all -1 block, not routed, is a block like
// any other). The blocks are kept, so equality is checked, never assumed from a hash.
import type { RoutedExperts } from "../types.js";

/** A route that is *none* (the call's last token): agrees with every route. */
export const NO_ROUTE = -1;

export class RouteIds {
  /** Distinct blocks, `width` ints each, in the order they were first seen (block i has id i). */
  private blocks = new Int32Array(0);
  private count = 0;
  /** Open addressing: id + 1 per slot, 0 when empty. */
  private slots = new Int32Array(64);

  constructor(readonly width: number) {}

  /** The ids of tokens [0, tokens) of `experts` (which holds at least that many entries). */
  ids(experts: RoutedExperts, tokens: number): Int32Array {
    const out = new Int32Array(tokens);
    for (let t = 0; t < tokens; t++) out[t] = this.idOf(experts.data, t * this.width);
    return out;
  }

  /** The id of the block at `data[from : from + width]`. */
  private idOf(data: ArrayLike<number>, from: number): number {
    const width = this.width;
    let hash = 0x811c9dc5;
    for (let i = 0; i < width; i++) hash = Math.imul(hash ^ data[from + i], 0x01000193);
    const mask = this.slots.length - 1;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const id = this.slots[slot] - 1;
      if (id < 0) {
        this.slots[slot] = this.add(data, from) + 1;
        if (this.count * 2 > this.slots.length) this.rehash();
        return this.count - 1;
      }
      if (this.equals(id, data, from)) return id;
    }
  }

  private equals(id: number, data: ArrayLike<number>, from: number): boolean {
    const at = id * this.width;
    for (let i = 0; i < this.width; i++) if (this.blocks[at + i] !== data[from + i]) return false;
    return true;
  }

  private add(data: ArrayLike<number>, from: number): number {
    const need = (this.count + 1) * this.width;
    if (need > this.blocks.length) {
      const grown = new Int32Array(Math.max(need, this.blocks.length * 2, 64));
      grown.set(this.blocks);
      this.blocks = grown;
    }
    for (let i = 0; i < this.width; i++) this.blocks[this.count * this.width + i] = data[from + i];
    return this.count++;
  }

  private rehash(): void {
    const slots = new Int32Array(this.slots.length * 2);
    const mask = slots.length - 1;
    for (let id = 0; id < this.count; id++) {
      let hash = 0x811c9dc5;
      for (let i = 0; i < this.width; i++) hash = Math.imul(hash ^ this.blocks[id * this.width + i], 0x01000193);
      let slot = hash & mask;
      while (slots[slot] !== 0) slot = (slot + 1) & mask;
      slots[slot] = id + 1;
    }
    this.slots = slots;
  }
}
