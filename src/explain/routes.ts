// What `callforest explain` says of a route_mismatch (SPEC v4): the call, the call it would have
// continued by tokens and media, the first token and layer where their routers chose other
// experts, and both expert sets at that token, one list per layer.
import { readRoutedExperts } from "../plan/routed-experts.js";
import type { Diagnostic, Rollout, RoutedExperts } from "../types.js";

export interface ExplainedRoute {
  rollout_id: string;
  call: string;
  kind: "route_mismatch";
  near: string;
  at: number;
  layer: number;
  /** The call's experts at token `at`, one list of K per layer. */
  experts: number[][];
  /** The near call's experts there. */
  near_experts: number[][];
}

/** The rollout's route_mismatch diagnostics (from its report), with both expert sets. */
export function explainRoutes(rollout: Rollout, diagnostics: readonly Diagnostic[]): ExplainedRoute[] {
  const byId = new Map(rollout.calls.map((call) => [call.id, call]));
  const out: ExplainedRoute[] = [];
  for (const d of diagnostics) {
    if (d.code !== "route_mismatch" || d.call === null || d.near === undefined || d.at === undefined) continue;
    out.push({
      rollout_id: rollout.rollout_id,
      call: d.call,
      kind: "route_mismatch",
      near: d.near,
      at: d.at,
      layer: d.layer ?? -1,
      experts: expertsAt(byId.get(d.call), d.at),
      near_experts: expertsAt(byId.get(d.near), d.at),
    });
  }
  return out;
}

/** A call's experts at token `at`, per layer (empty when they cannot be read: the plan read them). */
function expertsAt(call: Rollout["calls"][number] | undefined, at: number): number[][] {
  if (call === undefined) return [];
  const full = call.prompt_token_ids.length + call.generation_token_ids.length;
  const experts = readRoutedExperts(call.routed_experts, full);
  if (experts === null || typeof experts === "string" || at >= experts.tokens) return [];
  return perLayer(experts, at);
}

function perLayer({ layers, topk, data }: RoutedExperts, at: number): number[][] {
  return Array.from({ length: layers }, (_, l) =>
    Array.from(data.subarray((at * layers + l) * topk, (at * layers + l + 1) * topk)),
  );
}

/** One route mismatch as a line of text. */
export function routeText(route: ExplainedRoute, where: string, name: (text: string) => string): string {
  const layer = (sets: number[][]) => `[${(sets[route.layer] ?? []).join(" ")}]`;
  return (
    `${where}: ${name(route.rollout_id)} call ${name(route.call)}: near ${name(route.near)} at ${route.at}: ` +
    `route_mismatch in layer ${route.layer}: experts ${layer(route.experts)} where ${name(route.near)} ` +
    `had ${layer(route.near_experts)}\n`
  );
}
