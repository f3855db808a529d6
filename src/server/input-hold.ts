/**
 * Holds a connection's inbound requests and notifications until a promise settles, then delivers them in input order
 * (issue 34, cold start: `serve` answers `initialize` before its SQLite store is open, and opens it meanwhile; every
 * other message waits for the store). A request for the exempt method (`initialize`) with nothing held before it is
 * delivered at once; responses to the server's own requests are never held.
 *
 * Owns the waiting and the order only; never looks inside a message beyond its kind and method, never drops one.
 */
import type { Message } from "vscode-jsonrpc/node";
import { isNotificationMessage, isRequestMessage } from "./inbound-request.js";

export class InputHold {
  /** Set by `holdUntil` until its promise settled. */
  private holding: Promise<void> | undefined;
  /** The delivery of the last message held, so that later ones keep their input order. */
  private tail: Promise<void> | undefined;
  /** Messages held and not delivered yet. */
  private waiting = 0;

  /** `exempt`: the method a request may be delivered for at once when nothing is held before it. */
  constructor(private readonly exempt: string) {}

  /** Holds from now until `until` settles, fulfilled or rejected (a rejection is the caller's to report). */
  holdUntil(until: Promise<unknown>): void {
    const settled = until.then(
      () => undefined,
      () => undefined,
    );
    this.holding = settled;
    void settled.then(() => {
      if (this.holding === settled) this.holding = undefined;
    });
  }

  /** Hands `message` to `deliver` now, or once the hold settled and every message held before it was delivered. */
  pass(message: Message, deliver: (message: Message) => void): void {
    if (!this.mustHold(message)) {
      deliver(message);
      return;
    }
    this.waiting += 1;
    const after = this.tail ?? this.holding ?? Promise.resolve();
    const next = after.then(() => {
      this.waiting -= 1;
      deliver(message);
    });
    this.tail = next;
    void next.then(() => {
      if (this.tail === next) this.tail = undefined;
    });
  }

  private mustHold(message: Message): boolean {
    if (this.holding === undefined && this.waiting === 0) return false;
    if (isRequestMessage(message)) return message.method !== this.exempt || this.waiting > 0;
    return isNotificationMessage(message);
  }
}
