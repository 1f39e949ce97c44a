// The stages of bench/floor-stages.ts, in order (each runs every one before it).
export const STAGES = ["load", "read", "scan", "plan", "format"] as const;
export type Stage = (typeof STAGES)[number];
