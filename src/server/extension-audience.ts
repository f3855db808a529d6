/**
 * Who hears extension traffic on one connection, and in which spelling (PROTOCOL.md section 2): nothing of the
 * extension until the client uses it (it declared it in `initialize`, or called an extension method), then the
 * spelling it declared, else the spelling of its first extension call. Split out of rpc-connection.ts (issue 27).
 *
 * Owns that state only; never sends anything.
 */
import { isExtensionTraffic } from "./inbound-request.js";

/** The extension audience of one connection. Starts as "does not use the extension". */
export class ExtensionAudience {
  /** Set once the client uses the extension: declared in `initialize` or called a method. */
  #used = false;
  /** The `extensionPrefix` the client declared in `initialize`, if any: it wins over the first call's spelling. */
  #declaredPrefix: "" | "_" | undefined;
  /** The spelling of the first extension method the client called on this connection. */
  #firstCallPrefix: "" | "_" | undefined;

  /** The client declared the extension (`initialize`), optionally with the spelling it wants. */
  declare(prefix?: "" | "_"): void {
    this.#used = true;
    if (prefix !== undefined) this.#declaredPrefix = prefix;
  }

  /** The client called an extension method: it uses the extension, and its first call fixes the spelling. */
  noteCall(wireMethod: string): void {
    this.#used = true;
    this.#firstCallPrefix ??= wireMethod.startsWith("_") ? "_" : "";
  }

  /** True once the client uses the extension. */
  get used(): boolean {
    return this.#used;
  }

  /** The spelling extension traffic is sent in now. */
  get prefix(): "" | "_" {
    return this.#declaredPrefix ?? this.#firstCallPrefix ?? "";
  }

  /** True when the client is to get `method`: ACP traffic always, extension traffic once it uses the extension. */
  hears(method: string): boolean {
    return this.#used || !isExtensionTraffic(method);
  }

  /** The wire name of an outbound `method` given by its bare name: the prefix applied to extension traffic. */
  outboundName(method: string): string {
    if (this.prefix === "" || method.startsWith("_") || !isExtensionTraffic(method)) return method;
    return `_${method}`;
  }
}
