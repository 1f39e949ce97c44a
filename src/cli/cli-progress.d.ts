// The part of cli-progress (which ships no types) the progress bar uses.
declare module "cli-progress" {
  export interface Bar {
    start(total: number, value: number, payload?: Record<string, unknown>): void;
    update(value: number, payload?: Record<string, unknown>): void;
    stop(): void;
  }
  const cliProgress: {
    SingleBar: new (options: Record<string, unknown>, preset?: unknown) => Bar;
    Presets: { shades_classic: unknown };
  };
  export default cliProgress;
}
