/** Test support: planning a product on a started server and waiting for its plan. */
import type { Plan } from "../../protocol/common.js";
import type { ServerHandle } from "./server-process.js";

/**
 * Sends `product.plan` with `params` and waits up to `timeoutMs` for that product's `product.planReady` (received
 * before or after the answer). Resolves the product's id and the plan the leader proposed.
 */
export async function planProduct(
  server: ServerHandle,
  params: Record<string, unknown>,
  timeoutMs = 60_000,
): Promise<{ productId: string; plan: Plan }> {
  const { productId } = await server.request<{ productId: string }>("product.plan", params);
  const ready = await server.waitFor(
    (n) => n.method === "product.planReady" && n.params.productId === productId,
    timeoutMs,
  );
  return { productId, plan: ready.params.plan as Plan };
}
