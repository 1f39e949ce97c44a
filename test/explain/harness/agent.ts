// A small text-based agent harness over a real chat template and tokenizer (./model.ts): a leader
// that reasons, calls a tool and reads its results over many turns, gets follow-up questions,
// forks a subagent and compacts its history, as real harnesses do. In `render` mode each prompt
// is rendered from the chat messages and tokenized again (so the template and the harness break
// the prefix); in `tito` mode (token-in/token-out) each prompt resends exactly the tokens sampled
// before it and adds the new messages' tokens. Each break is recorded with the causes it was built
// with, in the order they occur in the turn, and where the rendered prompt parts from what was
// sampled.
import { mulberry32 } from "../../../src/random.js";
import type { Cause } from "../../../src/explain/cause.js";
import type { CanonicalCall, Rollout } from "../../../src/types.js";
import { pythonJson } from "./harmony.js";
import { AS_TEXT, type Message, type Model, type Sampled } from "./model.js";

/**
 * What a harness does wrong on one call (besides what the template does): `system` moves the
 * clock in the system prompt, `tools` adds a tool to the list, `as_text` keeps the stop token in
 * the message as text (decoded with special tokens, encoded with them split), `dup_stop` keeps it
 * as a special token, so that the template writes it twice.
 */
export type Fault =
  | "none"
  | "retokenize"
  | "newline"
  | "json"
  | "truncate"
  | "stop"
  | "system"
  | "tools"
  | "as_text"
  | "dup_stop";

export interface Expected {
  call: string;
  near: string;
  /** Where the rendered prompt parts from the near call's full sequence. */
  at: number;
  cause: Cause;
  /** The later changes inside the near call's generation, in order (explain's `also`). */
  also: Cause[];
}

export interface Conversation {
  rollout: Rollout;
  /**
   * Every break the harness made (render mode; none in tito mode), each compaction's root, and
   * each call whose glue after its parent's stop token is not the template's (`glue_differs`).
   */
  expected: Expected[];
  /** How many new contexts (the first, and one per compaction). */
  contexts: number;
}

interface Done {
  id: string;
  prompt: number[];
  full: number[];
  /** Index of its assistant message in the context's messages. */
  message: number;
  fault: Fault;
  reasoning: boolean;
  /** A tool call, and whether the template writes its arguments with other spacing than sampled. */
  toolCall: boolean;
  argsRespaced: boolean;
  /** The harness added a newline at the end of the message (it does so at every turn). */
  newlineAdded: boolean;
}

interface Context {
  agent: string;
  messages: Message[];
  /** The calls whose messages this context holds, in order (a fork shares its leader's). */
  chain: Done[];
  /** The harness re-renders the system prompt (its clock) before the next call. */
  newClock: boolean;
  /** How many tools the harness has added to its tool list. */
  extraTools: number;
  /** The harness adds a tool before the next call. */
  newTool: boolean;
}

const WORDS = (
  "the file list shows three modules parser writer reader and tests failing because config paths " +
  "changed yesterday so update imports then rerun suite carefully before committing anything else " +
  "function returns undefined when buffer empty handle that boundary explicitly"
).split(" ");
const COMMANDS = ["ls src", "cat README.md", "npm test", "grep -rn parse src", "git status"];

/**
 * One conversation of the harness. `only`: the harness makes this mistake on every turn that has
 * room for it, and no other (a rare mistake, tested on its own). `terminatorLost`: render through
 * a template without the assistant turn's terminator (true or false; by default one conversation
 * in ten, on Qwen3 and Llama 3).
 */
export function conversation(
  model: Model,
  seed: number,
  mode: "render" | "tito",
  only?: Fault,
  options: { terminatorLost?: boolean } = {},
): Conversation {
  const random = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const sentence = (min: number, max: number) => {
    const n = min + Math.floor(random() * (max - min + 1));
    const words = Array.from({ length: n }, () => pick(WORDS));
    return `${words[0]![0]!.toUpperCase()}${words.join(" ").slice(1)}.`;
  };
  let clock = 0;
  const system = () => `You are a coding agent working in a repository. Session clock: ${clock} minutes.`;
  const calls: CanonicalCall[] = [];
  const expected: Expected[] = [];
  const done = new Map<string, Done>();
  let contexts = 1;
  // A harness that adds a newline to every assistant message it stores (verl#6501's kind), drawn
  // apart from the turns so that the same seed samples the same turns either way.
  const newlineEveryTurn = mulberry32(seed * 7919)() < 0.2;
  // A token-in/token-out harness that adds each new message without the newline the template
  // writes after a stop token (verl#3720): no break, a `glue_differs` call each turn.
  const newlineLost = mode === "tito" && mulberry32(seed * 7919 + 1)() < 0.3;
  // A chat template without the assistant turn's terminator (a template bug users report): every
  // earlier assistant turn is rendered without the stop token the model sampled at its end.
  const terminatorLost =
    mode === "render" &&
    TERMINATOR[model.name] !== undefined &&
    (options.terminatorLost ?? mulberry32(seed * 7919 + 2)() < 0.1);
  const render = (messages: readonly Message[], extraTools: number): string => {
    const text = model.render(messages, true, extraTools);
    return terminatorLost ? text.replace(TERMINATOR[model.name]!, "$1") : text;
  };

  const leader: Context = {
    agent: "L",
    messages: [
      { role: "system", content: system() },
      { role: "user", content: `Task: ${sentence(8, 14)}` },
    ],
    chain: [],
    newClock: false,
    extraTools: 0,
    newTool: false,
  };

  /** The tokens of messages added after an assistant turn, as the template frames them. */
  const delta = (added: readonly Message[]): number[] => {
    const anchor = "ANCHOR";
    const text = model.render([{ role: "user", content: "." }, { role: "assistant", content: anchor }, ...added], true);
    const framed = text.slice(text.indexOf(anchor + model.stopText) + anchor.length + model.stopText.length);
    return model.encode(newlineLost ? framed.replace(/^\n/, "") : framed);
  };

  /** Whether the template writes a newline after `call`'s last token (its stop token). */
  const gluesWithNewline = (call: Done): boolean =>
    model.decode(call.full.slice(-1)) === model.stopText &&
    model
      .render(
        [
          { role: "user", content: "." },
          { role: "assistant", content: "A" },
          { role: "user", content: "." },
        ],
        false,
      )
      .includes(`${model.stopText}\n`);

  /** Which call of the context's chain the rendered prompt parts from, and why. */
  const label = (context: Context, id: string, prompt: number[], reset: Done | null): void => {
    if (reset) {
      expected.push({ call: id, near: reset.id, at: commonPrefix(reset.full, prompt), cause: "compaction", also: [] });
      return;
    }
    const previous = context.chain[context.chain.length - 1];
    if (previous === undefined) return;
    const at = commonPrefix(previous.full, prompt);
    if (at === previous.full.length) {
      // Resent exactly: no break, but the stop token kept in the message comes again after it.
      if (previous.fault === "dup_stop")
        expected.push({ call: id, near: previous.id, at, cause: "stop_duplicated", also: [] });
      return;
    }
    const x = [...context.chain]
      .reverse()
      .find((call) => call.prompt.length <= at && at < call.full.length && commonPrefix(call.full, prompt) === at);
    if (x === undefined) {
      // explain covers a root without a near parent only when it is not its agent's first call.
      if (!context.chain.some((call) => calls.find((c) => c.id === call.id)?.agent === context.agent)) return;
      expected.push({ call: id, near: previous.id, at, cause: "rewritten_prompt", also: [] });
      return;
    }
    const [cause, ...also] = turnChanges(model, context.messages, x, terminatorLost);
    expected.push({ call: id, near: x.id, at, cause: cause!, also });
  };

  /** One model call in `context`: render (or resend) the prompt, sample a turn, append it. */
  const step = (context: Context, added: Message[], reset: Done | null = null, summary = false): Done => {
    const id = `c${calls.length + 1}`;
    const previous = context.chain[context.chain.length - 1];
    if (context.newClock) {
      context.newClock = false;
      clock += 1 + Math.floor(random() * 9);
      context.messages[0] = { role: "system", content: system() };
    }
    if (context.newTool) {
      context.newTool = false;
      context.extraTools++;
    }
    context.messages.push(...added);
    const prompt =
      mode === "tito" && previous !== undefined && reset === null
        ? [...previous.full, ...delta(added)]
        : model.encode(render(context.messages, context.extraTools));
    if (mode === "render") label(context, id, prompt, reset);
    else if (newlineLost && previous !== undefined && reset === null && gluesWithNewline(previous)) {
      expected.push({ call: id, near: previous.id, at: previous.full.length, cause: "glue_differs", also: [] });
    }

    const reasoning = random() < (model.templateReasoning ? 0.6 : 0.35) ? sentence(6, 16) : null;
    const toolCalls =
      !summary && random() < 0.7 ? [{ name: "run", arguments: JSON.stringify({ cmd: pick(COMMANDS) }) }] : [];
    // gpt-oss writes no answer beside a tool call (its template would render one as analysis).
    const content =
      toolCalls.length > 0 && (random() < 0.3 || model.harmony) ? "" : sentence(summary ? 12 : 3, summary ? 20 : 10);
    // The same faults in both modes (the same seed samples the same turns): token-in/token-out
    // resends them exactly, so they break nothing there.
    // A mistake that the turn has no room for (no answer to truncate, no tool call to re-serialize)
    // is drawn again (twice at most), so that each kind occurs often enough in a few conversations.
    let fault: Fault = pick(FAULTS);
    for (let draw = 0; draw < 2 && !fits(model, fault, content, toolCalls.length > 0); draw++) fault = pick(FAULTS);
    if (only !== undefined) fault = fits(model, only, content, toolCalls.length > 0) ? only : "none";
    const turn: Sampled = { reasoning, content, toolCalls };
    let generation: number[];
    let applied: Fault = fault;
    // What the harness keeps of the turn: a "json" harness re-serializes the tool call's
    // arguments the model wrote with spaces; a "truncate" one cuts the answer's last word.
    let kept = content;
    if (fault === "json" && toolCalls.length > 0) {
      const spaced = toolCalls.map((call) => ({ ...call, arguments: spacedArguments(call.arguments) }));
      generation = model.encode(model.sampledText({ ...turn, toolCalls: spaced }));
    } else if (fault === "truncate" && content.split(" ").length >= 3) {
      kept = `${content.slice(0, content.lastIndexOf(" "))}.`;
      generation = model.encode(model.sampledText(turn));
    } else if (fault === "newline" && content !== "") {
      generation = model.encode(model.sampledText({ ...turn, content: `${content}\n` }));
    } else if (fault === "stop" && !model.harmony) {
      generation = model.encode(model.sampledText(turn, "other"));
    } else if (fault === "retokenize") {
      const text = model.sampledText(turn);
      const from = model.answerStart(text);
      const split = splitWord(model, text, from, from + content.length);
      generation = split ?? model.encode(model.sampledText(turn));
      if (split === null) applied = "none";
    } else {
      generation = model.encode(model.sampledText(turn));
      const content = ["newline", "json", "truncate", "stop"] as const;
      if (content.some((f) => f === fault)) applied = "none";
      if (fault === "tools" && !model.listsTools) applied = "none";
    }
    if ((fault === "as_text" || fault === "dup_stop") && !fits(model, fault, kept, toolCalls.length > 0))
      applied = "none";
    // Without the template's terminator, a stop token kept in the message is the turn's only one.
    if (fault === "dup_stop" && terminatorLost) applied = "none";
    // The message as the harness stores it: the stop token kept as text, or a newline added.
    const stopSampled = model.decode(generation.slice(-1));
    const newlineAdded =
      newlineEveryTurn && !model.trims && kept !== "" && applied !== "as_text" && applied !== "dup_stop";
    if (applied === "as_text") kept = `${kept}${AS_TEXT}${stopSampled}`;
    else if (applied === "dup_stop") kept = `${kept}${stopSampled}`;
    else if (newlineAdded) kept = `${kept}\n`;
    calls.push({
      id,
      agent: context.agent,
      prompt_token_ids: prompt,
      generation_token_ids: generation,
      generation_log_probs: generation.map(() => -0.5),
    });
    // The harness keeps the turn as a chat message: the reasoning apart (the template decides
    // whether to render it), the content as the model wrote it, trimmed.
    context.messages.push({
      role: "assistant",
      content: model.templateReasoning ? kept : [kept, ...toolCalls.map(llamaToolText)].filter(Boolean).join("\n"),
      ...(reasoning === null ? {} : { reasoning_content: reasoning }),
      ...(toolCalls.length === 0 || !model.templateReasoning
        ? {}
        : { tool_calls: toolCalls.map((call) => ({ type: "function" as const, function: call })) }),
    });
    const made: Done = {
      id,
      prompt,
      full: [...prompt, ...generation],
      message: context.messages.length - 1,
      fault: applied,
      reasoning: reasoning !== null,
      toolCall: toolCalls.length > 0,
      argsRespaced:
        toolCalls.length > 0 &&
        (applied === "json" ? spacedArguments(toolCalls[0]!.arguments) : toolCalls[0]!.arguments) !==
          pythonJson(JSON.parse(toolCalls[0]!.arguments)),
      newlineAdded,
    };
    context.chain.push(made);
    done.set(id, made);
    if (applied === "system") context.newClock = true;
    if (applied === "tools") context.newTool = true;
    return made;
  };

  const followUps = (context: Context, last: Done): Message[] =>
    random() < 0.75 && lastHadTool(context, last)
      ? [{ role: "tool", content: `${pick(COMMANDS)}: ${sentence(4, 12)}` }]
      : [{ role: "user", content: `Follow-up: ${sentence(5, 10)}` }];

  let last = step(leader, []);
  const turns = 6 + Math.floor(random() * 6);
  let forked = false;
  let compacted = false;
  for (let t = 0; t < turns; t++) {
    const event = random();
    if (!forked && event < 0.15) {
      // A fork: the whole history so far, and a subtask; two calls of its own.
      forked = true;
      const fork: Context = {
        agent: "F",
        messages: [...leader.messages],
        chain: [...leader.chain],
        newClock: false,
        extraTools: leader.extraTools,
        newTool: false,
      };
      let f = step(fork, [{ role: "user", content: `Subtask: ${sentence(5, 9)}` }]);
      f = step(fork, followUps(fork, f));
      last = step(leader, [{ role: "user", content: `Subagent result: ${sentence(5, 9)}` }]);
    } else if (!compacted && event < 0.3 && t > 2) {
      // Compaction: a summary call, then a new context with the summary in it.
      compacted = true;
      contexts++;
      const summary = step(
        leader,
        [{ role: "user", content: "Summarize the work so far for a fresh context." }],
        null,
        true,
      );
      const content = leader.messages[leader.messages.length - 1]!.content;
      leader.messages = [
        { role: "system", content: system() },
        { role: "user", content: `Task summary: ${content}\nContinue the task.` },
      ];
      leader.chain = [];
      leader.newClock = false;
      leader.newTool = false;
      last = step(leader, [], summary);
    } else last = step(leader, followUps(leader, last));
  }
  return {
    rollout: {
      rollout_id: `${model.name}-${mode}-${seed}`,
      reward: 1,
      agents: [
        { id: "L", parent: null, mode: "leader" },
        { id: "F", parent: "L", mode: "fork" },
      ],
      calls,
    },
    expected,
    contexts,
  };
}

function llamaToolText(call: { name: string; arguments: string }): string {
  return `{"name": "${call.name}", "parameters": ${call.arguments}}`;
}

function lastHadTool(context: Context, last: Done): boolean {
  const message = context.messages[last.message];
  return message !== undefined && (message.tool_calls !== undefined || message.content.includes('"parameters"'));
}

/**
 * A template bug: the assistant turn's terminator left out. Applied to the rendered text (so the
 * templates stay as shipped), it matches each assistant turn up to its last terminator before the
 * next header (a stop token kept in the content comes before it) and drops that terminator.
 * Qwen3's template writes `<|im_end|>\n` as one literal after an assistant turn: both go.
 */
const TERMINATOR: Partial<Record<Model["name"], RegExp>> = {
  qwen3: /(<\|im_start\|>assistant\n(?:(?!<\|im_start\|>)[\s\S])*)<\|im_end\|>\n/g,
  llama3_1: /(<\|start_header_id\|>assistant<\|end_header_id\|>\n\n(?:(?!<\|start_header_id\|>)[\s\S])*)<\|eot_id\|>/g,
};

const FAULTS: readonly Fault[] = [
  "none",
  "none",
  "none",
  "retokenize",
  "newline",
  "json",
  "truncate",
  "stop",
  "system",
  "tools",
  "as_text",
  "dup_stop",
];

/** Whether a turn has room for the mistake (the harness may still find none to make: a word to split). */
function fits(model: Model, fault: Fault, content: string, toolCall: boolean): boolean {
  switch (fault) {
    case "newline":
    case "truncate":
      return content !== "";
    case "json":
      return toolCall;
    case "stop":
      return !model.harmony;
    case "tools":
      return model.listsTools;
    case "as_text":
      return content !== "" && !toolCall;
    case "dup_stop":
      return content !== "" && !toolCall && !model.harmony; // gpt-oss's template writes <|end|> after <|return|>
    default:
      return true;
  }
}

/** The arguments as a model writes them with a space after the colon. */
function spacedArguments(text: string): string {
  return text.replace('":"', '": "');
}

/**
 * What the template and the harness changed in turn `x` as it is rendered now, in the order they
 * occur in the turn: its causes (docs/breaks.md). A rewritten stretch ends the list (explain lists
 * nothing after it).
 */
function turnChanges(model: Model, messages: readonly Message[], x: Done, terminatorLost: boolean): Cause[] {
  const changes: Cause[] = [];
  if (x.reasoning && !model.keepsReasoning(messages, x.message)) changes.push("reasoning_dropped");
  if (model.harmony && x.toolCall) {
    changes.push("header_rewritten");
    if (x.argsRespaced) changes.push("whitespace");
    return changes;
  }
  if (x.fault === "retokenize") changes.push("retokenized");
  if (x.fault === "truncate") return [...changes, "rewritten"];
  if (x.fault === "newline" && !x.newlineAdded) changes.push("whitespace");
  if (x.newlineAdded && x.fault !== "newline") changes.push("whitespace");
  if (x.fault === "as_text") return [...changes, "special_as_text"];
  if (x.fault === "json") changes.push("whitespace");
  // The stop token sampled (or the other one) is missing: one special token either way.
  if (x.fault === "stop" || model.harmony || terminatorLost) changes.push("special_token");
  return changes;
}

/**
 * The sampled text's tokens with one word (after `from`) split in two where the tokenizer would
 * not split it: a valid, non-canonical tokenization, as a model samples now and then. Null if no
 * word can be split so.
 */
function splitWord(model: Model, text: string, from: number, to: number): number[] | null {
  const canonical = model.encode(text);
  const words = [...text.slice(from, to).matchAll(/ [a-z]{5,}(?=[ .,\n])/g)];
  for (const match of words) {
    const start = from + match.index!;
    const word = match[0];
    const cut = 3;
    const ids = [
      ...model.encode(text.slice(0, start)),
      ...model.encode(word.slice(0, cut)),
      ...model.encode(word.slice(cut)),
      ...model.encode(text.slice(start + word.length)),
    ];
    if (ids.length !== canonical.length || ids.some((id, i) => id !== canonical[i])) {
      if (model.decode(ids) === model.decode(canonical)) return ids;
    }
  }
  return null;
}

export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  return k;
}
