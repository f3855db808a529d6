/**
 * One server → client request on a vscode-jsonrpc connection, with the local endings the connection promises: a
 * timeout (`RequestTimeoutError`, and the client is told to cancel), an abort (the signal's reason, and the client is
 * told to cancel), and the input ending first (`ConnectionClosedError`). Split out of rpc-connection.ts (issue 27).
 *
 * Owns the life of one outbound request only: never applies the extension prefix (the caller passes the wire name),
 * never validates the result.
 */
import { CancellationTokenSource, ParameterStructures, type MessageConnection } from "vscode-jsonrpc/node";
import {
  ConnectionClosedError,
  RequestTimeoutError,
  type OutboundRequestOptions,
} from "../adapters/persistence/host-requester.js";

/**
 * Sends `wire` with `params` (by name) and resolves with the client's `result`. Rejects with the client's
 * `ResponseError`, `RequestTimeoutError` after `options.timeoutMs`, the signal's reason when `options.signal` aborts,
 * `ConnectionClosedError` when a closer registered in `closers` is called (the connection calls them all when its
 * input ends), or the connection's own error when sending throws. Removes its closer from `closers` once settled.
 */
export function sendOutboundRequest(
  connection: MessageConnection,
  wire: string,
  params: object | undefined,
  options: OutboundRequestOptions,
  closers: Set<() => void>,
): Promise<unknown> {
  const { signal, timeoutMs } = options;
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise<unknown>((resolve, reject) => {
    const source = new CancellationTokenSource();
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const settle = (action: () => void) => {
      if (settled) return;
      settled = true;
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      closers.delete(onClosed);
      action();
    };
    const onAbort = () => {
      source.cancel();
      settle(() => reject(abortReason(signal!)));
    };
    const onClosed = () => settle(() => reject(new ConnectionClosedError(wire)));
    closers.add(onClosed);
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        source.cancel();
        settle(() => reject(new RequestTimeoutError(wire, timeoutMs)));
      }, timeoutMs);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    let pending: Promise<unknown>;
    try {
      pending =
        params === undefined
          ? connection.sendRequest(wire, source.token)
          : connection.sendRequest(wire, ParameterStructures.byName, params, source.token);
    } catch (error) {
      settle(() => reject(error));
      return;
    }
    pending.then(
      (result) => settle(() => resolve(result)),
      (error: unknown) => settle(() => reject(error)),
    );
  });
}

/** Why an aborted request rejects: the signal's reason, or a plain error when it has none. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error("The request was aborted.");
}
