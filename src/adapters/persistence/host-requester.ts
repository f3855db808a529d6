/**
 * What the host authority needs of a connection (HostRequester), the options of one server → client request, and the
 * two local errors such a request can end with besides the host's own `ResponseError`.
 *
 * Lives here, under the host authority that depends on it, so that the authority never imports the server: the
 * server's `RpcConnection` (src/server/rpc-connection.ts) implements `HostRequester` and throws these errors (an
 * import pointing downward, DESIGN.md Layers). Owns these declarations only; the errors are never sent on the wire.
 */

/** Options of one server → client request. */
export interface OutboundRequestOptions {
  /** Rejects with `RequestTimeoutError` after this many milliseconds without an answer. Default: no timeout. */
  timeoutMs?: number;
  /** Aborting rejects the request with the signal's reason and tells the client to cancel it. */
  signal?: AbortSignal;
}

/**
 * What HostAuthority needs of a connection: `RpcConnection.request` (src/server/rpc-connection.ts), which applies the
 * client's extension prefix (`_runState/put`) and rejects with `ResponseError`, `RequestTimeoutError` or
 * `ConnectionClosedError`.
 */
export interface HostRequester {
  request(method: string, params: object | undefined, options?: OutboundRequestOptions): Promise<unknown>;
}

/** A server → client request got no answer within its timeout. A local error; never sent on the wire. */
export class RequestTimeoutError extends Error {
  override readonly name = "RequestTimeoutError";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`The client did not answer ${method} within ${timeoutMs} ms.`);
  }
}

/** The input ended (or the connection was disposed) before the client answered a server → client request. */
export class ConnectionClosedError extends Error {
  override readonly name = "ConnectionClosedError";
  constructor(readonly method: string) {
    super(`The connection closed before the client answered ${method}.`);
  }
}
