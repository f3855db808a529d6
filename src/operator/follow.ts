/**
 * Follows one product driven by a server the caller is connected to, until it stops moving: completed, failed,
 * cancelled or paused (or a task waits for an answer). Output deltas feed the view as they stream; task states come
 * from `product.status`, read after every status notification and at least every `pollMs`.
 *
 * Owns the following loop only.
 */
import type { TaskState } from "../../protocol/common.js";
import type { ProgressView } from "./progress-view.js";
import type { Params, ServerSession } from "./server-client.js";

export interface FollowedStatus {
  phase: string;
  tasks: TaskState[];
  recovery?: { cause: string; resumable: boolean; remediation: string };
  [k: string]: unknown;
}

/** Resolves with the last `product.status` once the product is terminal, paused, or waiting for an answer. */
export async function followProduct(
  session: ServerSession,
  productId: string,
  view: ProgressView,
  pollMs = 1000,
): Promise<FollowedStatus> {
  let wake: (() => void) | undefined;
  session.onNotification((method, p: Params) => {
    if (p.productId !== productId) return;
    if (method === "product.taskOutputDelta") view.addOutput(String(p.taskId), String(p.text));
    if (method === "product.taskStatus" || method === "product.completed" || method === "product.persistenceError")
      wake?.();
  });
  for (;;) {
    const status = await session.request<FollowedStatus>("product.status", { productId });
    view.update(status.tasks, Date.now());
    const waiting = status.tasks.some((t) => t.status === "waiting");
    if (
      ["completed", "failed", "cancelled", "paused"].includes(status.phase) ||
      (status.phase === "executing" && waiting)
    ) {
      view.finish(Date.now());
      return status;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, pollMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    wake = undefined;
  }
}
