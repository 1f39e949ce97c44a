// Rejection details name the call at fault as `call "<id>" (calls[<k>])`: the id JSON-quoted, so
// a check for c1 is not passed by a detail naming c12.
import { expect } from "vitest";

export function expectNamesCall(detail: string | undefined, id: string): void {
  expect(detail).toBeTypeOf("string");
  const named = detail!.includes(`call ${JSON.stringify(id)} (calls[`);
  expect({ detail, names: id, named }).toEqual({ detail, names: id, named: true });
}
