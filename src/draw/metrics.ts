// Text metrics and fixed spacing shared by every picture (forest and packed).

/** Font size everywhere, in px. Constant: big rollouts get wider (or marks get smaller), never the text. */
export const FONT = 11;
/** Advance of one monospace character at FONT, rounded up. */
export const CHAR = 7;
export const MARGIN = 16;
export const FONT_FAMILY =
  "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', 'Liberation Mono', monospace";
