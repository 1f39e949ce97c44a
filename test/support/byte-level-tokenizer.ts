// A tokenizer.json for the page's tests, made here (no download).
/**
 * A small byte-level BPE tokenizer.json (GPT-2's format): the 256 byte symbols, a few merges,
 * and two special tokens (and any `specials`), so a test needs no download.
 */
export function byteLevelTokenizer(specials: { id: number; content: string }[] = []): object {
  const printable = [...range(33, 126), ...range(161, 172), ...range(174, 255)];
  const symbols = new Map<number, string>();
  let extra = 0;
  for (let b = 0; b < 256; b++) symbols.set(b, String.fromCodePoint(printable.includes(b) ? b : 256 + extra++));
  const vocab: Record<string, number> = {};
  for (let b = 0; b < 256; b++) vocab[symbols.get(b)!] = b;
  const merges = [
    ["h", "e"],
    ["l", "l"],
    ["he", "ll"],
    ["hell", "o"],
    ["Ġ", "w"],
  ];
  merges.forEach(([a, b], i) => (vocab[a + b] = 256 + i));
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      special(300, "<|end|>"),
      special(301, "<|start|>"),
      ...specials.map((t) => special(t.id, t.content)),
    ],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
