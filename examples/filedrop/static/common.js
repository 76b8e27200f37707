// What the three demo pages share: a status line the tests read, and a digesting tap.
import { Sha256 } from "/static/sha256.js";

/** Show progress or the outcome; tests wait for data-state="done" or "error". */
export function report(state, fields = {}) {
  const out = document.getElementById("status");
  for (const name of Object.keys(out.dataset)) delete out.dataset[name];
  out.dataset.state = state;
  for (const [name, value] of Object.entries(fields)) out.dataset[name] = String(value);
  const text = Object.entries(fields).map(([k, v]) => `${k}: ${v}`).join("\n");
  out.textContent = `${state}\n${text}`;
}

/** A TransformStream that passes bytes through, counting them into a SHA-256. */
export function digestTap(onBytes) {
  const sha = new Sha256();
  let bytes = 0;
  const tap = new TransformStream({
    transform(chunk, controller) {
      sha.update(chunk);
      bytes += chunk.length;
      if (onBytes) onBytes(bytes);
      controller.enqueue(chunk);
    },
  });
  tap.result = () => ({ sha256: sha.hex(), bytes });
  return tap;
}

/** Read a stream to its end, dropping the bytes (they were digested on the way). */
export async function drain(stream) {
  const reader = stream.getReader();
  for (;;) {
    const { done } = await reader.read();
    if (done) return;
  }
}

export function failed(err) {
  report("error", { error: err && err.name ? err.name : String(err), message: err && err.message });
}
