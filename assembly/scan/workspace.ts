// A scratch region for the serializer host: staged input values and output text.
import { BASE, ensureMemory } from "./memory";

/** Makes `bytes` bytes at BASE addressable and returns BASE (0 when memory cannot grow). */
export function workspace(bytes: usize): usize {
  return ensureMemory(<u64>BASE + <u64>bytes) ? BASE : 0;
}
