// The tokenizer picker: none (token ids), an OpenAI encoding (its ranks fetched from the page's
// own origin, where `callforest view` serves them), or a tokenizer file opened here (a Hugging
// Face tokenizer.json, or a .tiktoken rank file). Nothing is fetched on a page opened from disk.
import {
  OPENAI_ENCODINGS,
  isOpenAiEncoding,
  openAiRanksPath,
  type OpenAiEncoding,
} from "../src/tokenizer/encodings.js";
import { tokenizerFromText } from "../src/tokenizer/load.js";
import type { TokenDecoder } from "../src/tokenizer/decoder.js";

export class TokenizerPicker {
  decoder: TokenDecoder | null = null;
  /** Called when the decoder changed (the page redraws the strip and details). */
  onChange: () => void = () => {};
  private readonly cache = new Map<string, TokenDecoder>();

  constructor(
    private readonly select: HTMLSelectElement,
    file: HTMLInputElement,
    private readonly say: (text: string, error?: boolean) => void,
  ) {
    const none = new Option("token ids", "");
    select.append(none);
    for (const name of Object.keys(OPENAI_ENCODINGS)) select.append(new Option(name, name));
    select.append(new Option("file…", "file"));
    select.addEventListener("change", () => {
      const value = select.value;
      if (value === "file") return file.click();
      if (value === "") this.use(null);
      else this.useEncoding(value as OpenAiEncoding).catch((error) => this.fail(error));
    });
    file.addEventListener("change", () => {
      const chosen = file.files?.[0];
      if (chosen !== undefined) this.useFile(chosen).catch((error) => this.fail(error));
    });
  }

  private fail(error: unknown): void {
    this.say(error instanceof Error ? error.message : String(error), true);
    this.select.value = this.decoder === null ? "" : this.select.value;
  }

  private use(decoder: TokenDecoder | null): void {
    this.decoder = decoder;
    document.body.dataset.tokenizer = decoder?.name ?? "";
    this.onChange();
  }

  /** An OpenAI encoding, its ranks from `tokenizers/<name>.tiktoken` on this page's origin. */
  async useEncoding(name: OpenAiEncoding): Promise<void> {
    const cached = this.cache.get(name);
    if (cached !== undefined) return this.use(cached);
    if (location.protocol === "file:") {
      throw new Error(
        `${name}: a page opened from disk fetches nothing; open gpt-tokenizer's ` +
          `${OPENAI_ENCODINGS[name]}.tiktoken with "file…" (pick ${name} first for its special tokens), ` +
          `or run callforest view --tokenizer ${name}`,
      );
    }
    this.say(`loading ${name}…`);
    const response = await fetch(new URL(openAiRanksPath(name), location.href));
    if (!response.ok)
      throw new Error(
        `${name}: no ranks at ${openAiRanksPath(name)} (HTTP ${response.status}); ` +
          `callforest view serves them, or open the .tiktoken file with "file…"`,
      );
    const decoder = tokenizerFromText(`${name}.tiktoken`, await response.text(), name);
    this.cache.set(name, decoder);
    this.select.value = name;
    this.say(`tokenizer: ${name}`);
    this.use(decoder);
  }

  /** A tokenizer file opened in the page; a .tiktoken takes the picked encoding's special tokens. */
  async useFile(file: File): Promise<void> {
    const picked = this.decoder !== null && isOpenAiEncoding(this.decoder.name) ? this.decoder.name : undefined;
    const decoder = tokenizerFromText(
      file.name,
      await file.text(),
      file.name.endsWith(".tiktoken") ? picked : undefined,
    );
    this.select.value = "file";
    this.select.options[this.select.selectedIndex].textContent = `file: ${file.name}`;
    this.say(`tokenizer: ${file.name}`);
    this.use(decoder);
  }

  /** ?tokenizer= (what `view --tokenizer` passes): an encoding's name, or a file on this origin. */
  async fromQuery(value: string, ownUrl: (path: string, parameter: string) => URL): Promise<void> {
    if (isOpenAiEncoding(value)) return this.useEncoding(value);
    const url = ownUrl(value, "tokenizer");
    const response = await fetch(url);
    if (!response.ok) throw new Error(`cannot load ${value}: HTTP ${response.status}`);
    const name = decodeURIComponent(url.pathname.split("/").pop() || value);
    const decoder = tokenizerFromText(name, await response.text());
    this.select.value = "file";
    this.select.options[this.select.selectedIndex].textContent = `file: ${name}`;
    this.say(`tokenizer: ${name}`);
    this.use(decoder);
  }
}
