// A hand-built history: the task with one image, then turns of reasoning, a function call, its
// output and an image observation.
import { SemanticHistory } from "../../src/compaction/history.js";
import { MediaStore } from "../../src/compaction/media.js";
import { png } from "./support.js";

export async function sampleHistory(
  turns: number,
): Promise<{ history: SemanticHistory; media: MediaStore; images: string[] }> {
  const history = new SemanticHistory();
  const media = new MediaStore();
  const images: string[] = [];
  const task = await media.put(png(32, 32, 0));
  images.push(task.id);
  history.append({
    kind: "user",
    origin: "initial",
    turn: -1,
    parts: [
      { type: "text", text: "Task." },
      { type: "image", mediaId: task.id },
    ],
  });
  for (let t = 0; t < turns; t++) {
    history.append({ kind: "reasoning", origin: "model", turn: t, id: `rs_${t}`, text: `thinking ${t}` });
    history.append({
      kind: "function_call",
      origin: "model",
      turn: t,
      id: `fc_${t}`,
      callId: `call_${t}`,
      name: "move",
      arguments: `{"direction":"north"}`,
    });
    history.append({
      kind: "function_output",
      origin: "environment",
      turn: t,
      callId: `call_${t}`,
      output: `moved ${t}`,
    });
    const image = await media.put(png(32, 16, t + 1));
    images.push(image.id);
    history.append({ kind: "user", origin: "environment", turn: t, parts: [{ type: "image", mediaId: image.id }] });
  }
  return { history, media, images };
}
