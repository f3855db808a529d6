/**
 * The requester's side of control requests (issue 29; docs/PROTOCOL.md, "Control requests"): writes one request record
 * through the run-state authority for the server that owns a product, waits for that server to accept and answer it,
 * and reads the answer back. Used by the CLI's control verbs and the dashboard's buttons, neither of which owns the
 * product.
 *
 * Owns the request's life on the requesting side: idempotence by request id (a request id already answered is
 * answered again from its record; one still pending is waited for), withdrawal by compare-and-swap when nobody takes
 * it in time (then nothing was or will be executed). It never executes a
 * request itself: with no taker the caller decides (the CLI takes ownership through a server of its own).
 */
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import {
  CONTROL_REQUEST_KIND,
  ControlRequestRecord,
  InvalidControlAnswer,
  controlRequestId,
  type ControlMethod,
  type ControlRefusal,
} from "../core/product/control-requests.js";
import { ProductStore } from "../core/product/store.js";
import { AuthorityConflict, type OwnerLiveness, type RunStateAuthority } from "../core/ports.js";
import { notFound } from "../core/errors.js";

export interface ControlCall {
  productId: string;
  method: ControlMethod;
  /** The method's params (`productId` is added). */
  params?: Record<string, unknown>;
  /** Idempotence key (default: a fresh random id). */
  requestId?: string;
  /** `answer TASK`: refused unless TASK is the waiting task the message answers. */
  waitingTask?: string;
  /** Who asks (stored as `by`). Default `cli:<host>:<pid>`. */
  by?: string;
  /** How long a live owner has to accept, ms (default 5 000). Without a live owner: `unownedAcceptMs`. */
  acceptMs?: number;
  /** How long a server that created the product (and holds no lease) has to accept, ms (default 1 500). */
  unownedAcceptMs?: number;
  /** How long an accepted request may take to be answered, ms (default 120 000). */
  answerMs?: number;
}

/** How a control request ended for the requester. */
export type ControlOutcome =
  | {
      kind: "done";
      requestId: string;
      result: Record<string, unknown>;
      by: string;
      acceptedAfterMs: number;
      answeredAfterMs: number;
    }
  /** `invalidRecord`: the stored request record itself was refused (not what this command sent, e.g. `--request-id`). */
  | { kind: "refused"; requestId: string; error: ControlRefusal; by?: string; invalidRecord?: true }
  /** Nobody accepted it in time; it was withdrawn, so nothing was or will be executed. `owner`: a live lease holder. */
  | { kind: "unclaimed"; requestId: string; owner?: string }
  /** Accepted by `by` but not answered in time (or `by` died): its effect is unknown, `status` tells. */
  | { kind: "unanswered"; requestId: string; by: string; ownerDead: boolean };

/** The requester's label: `cli:<host>:<pid>`. */
export function requesterLabel(kind = "cli"): string {
  return `${kind}:${hostname()}:${process.pid}`;
}

/** A fresh request id (`req_` and 20 hex digits). */
export function newRequestId(): string {
  return `req_${randomUUID().replace(/-/g, "").slice(0, 20)}`;
}

/**
 * Files `call` for the owner of its product and waits for the outcome. Throws DomainError `not_found` for an unknown
 * product, `AuthorityFailure` when the store fails. The answered record is deleted once read.
 */
export async function requestControl(
  authority: RunStateAuthority,
  liveness: OwnerLiveness | undefined,
  call: ControlCall,
): Promise<ControlOutcome> {
  const store = new ProductStore(authority, 20);
  const projectId = await store.projectOf(call.productId);
  if (projectId === undefined) throw notFound("product", call.productId);
  const requestId = call.requestId ?? newRequestId();
  const id = controlRequestId(call.productId, requestId);
  const { lease } = await store.readLease(projectId, call.productId);
  const now = Date.now();
  const owner =
    lease && Date.parse(lease.expiresAt) > now && liveness?.check(lease.owner) !== "dead" ? lease.owner : undefined;
  const acceptMs = owner !== undefined ? (call.acceptMs ?? 5_000) : (call.unownedAcceptMs ?? 1_500);
  const answerMs = call.answerMs ?? 120_000;
  const record: ControlRequestRecord = {
    v: 1,
    requestId,
    productId: call.productId,
    method: call.method,
    params: { ...call.params, productId: call.productId },
    ...(call.waitingTask !== undefined ? { waitingTask: call.waitingTask } : {}),
    by: call.by ?? requesterLabel(),
    at: new Date(now).toISOString(),
    expiresAt: new Date(now + acceptMs + answerMs).toISOString(),
    state: "pending",
  };
  try {
    await authority.put(projectId, CONTROL_REQUEST_KIND, id, record, null);
  } catch (err) {
    // The same request id was filed before (a repeated command): its record is the request; wait for it.
    if (!(err instanceof AuthorityConflict)) throw err;
  }
  return waitForAnswer(authority, { projectId, id, requestId, owner, started: now, acceptMs, answerMs, liveness });
}

interface Waiting {
  projectId: string;
  id: string;
  requestId: string;
  owner: string | undefined;
  started: number;
  acceptMs: number;
  answerMs: number;
  liveness: OwnerLiveness | undefined;
  /** Set once the live owner the request was filed for is seen dead. */
  ownerDead?: boolean;
  lastOwnerCheck?: number;
}

/** True once the owner the request was filed for is provably dead (checked at most once a second). */
function ownerDied(w: Waiting, now: number): boolean {
  if (w.owner === undefined || w.liveness === undefined) return false;
  if (w.ownerDead) return true;
  if (now - (w.lastOwnerCheck ?? 0) < 1_000) return false;
  w.lastOwnerCheck = now;
  w.ownerDead = w.liveness.check(w.owner) === "dead";
  return w.ownerDead;
}

async function waitForAnswer(authority: RunStateAuthority, w: Waiting): Promise<ControlOutcome> {
  let wake: (() => void) | undefined;
  const unwatch = authority.watch?.((change) => {
    if (change.kind === CONTROL_REQUEST_KIND && (change.id === undefined || change.id === w.id)) wake?.();
  });
  let acceptedAt: number | undefined;
  let lastLivenessCheck = 0;
  try {
    for (;;) {
      const stored = await authority.get(w.projectId, CONTROL_REQUEST_KIND, w.id);
      if (!stored) return { kind: "unclaimed", requestId: w.requestId, ...(w.owner ? { owner: w.owner } : {}) };
      const invalid = InvalidControlAnswer.safeParse(stored.value);
      if (invalid.success) {
        await removeAnswered(authority, w, stored.revision);
        return { kind: "refused", requestId: w.requestId, error: invalid.data.error, invalidRecord: true };
      }
      const parsed = ControlRequestRecord.safeParse(stored.value);
      if (!parsed.success) {
        return {
          kind: "refused",
          requestId: w.requestId,
          error: { code: "invalid_input", message: `The stored request ${w.id} does not parse.`, details: {} },
          invalidRecord: true,
        };
      }
      const r = parsed.data;
      const now = Date.now();
      if (r.state === "done" || r.state === "refused") {
        // The owner keeps answers for a while (idempotence) and then removes them; a deleted product has no owner left.
        if (r.method === "product.delete") await removeAnswered(authority, w, stored.revision);
        return answeredOutcome(r, w, acceptedAt, now);
      }
      if (r.state === "accepted") {
        acceptedAt ??= now;
        const by = r.acceptedBy ?? "";
        if (now - lastLivenessCheck > 1_000) {
          lastLivenessCheck = now;
          if (w.liveness?.check(by) === "dead")
            return { kind: "unanswered", requestId: w.requestId, by, ownerDead: true };
        }
        if (now - acceptedAt > w.answerMs) return { kind: "unanswered", requestId: w.requestId, by, ownerDead: false };
      } else if (now - w.started > w.acceptMs || ownerDied(w, now)) {
        // Nobody took it: withdraw by CAS (an owner that accepts meanwhile wins, and the loop reads its answer).
        const withdrawn = await authority
          .delete(w.projectId, CONTROL_REQUEST_KIND, w.id, stored.revision)
          .catch((err: unknown) => {
            if (err instanceof AuthorityConflict) return false;
            throw err;
          });
        // An owner that died while the request waited is no owner: the caller may take the product over.
        const owner = w.owner !== undefined && !w.ownerDead ? { owner: w.owner } : {};
        if (withdrawn) return { kind: "unclaimed", requestId: w.requestId, ...owner };
        continue;
      }
      // Woken by the change feed (PostgreSQL) at once; else a short poll (a SQLite read is microseconds).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, unwatch ? 250 : 25);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  } finally {
    unwatch?.();
  }
}

/**
 * The outcome of an answered (`done` or `refused`) request. `acceptedAt`: when this process saw it accepted (its
 * clock, ms), `undefined` when it first saw it answered; the answer's time is the owner's `answeredAt`. A request
 * seen accepted only after the owner had answered it (the poll came late) counts as accepted when answered, never
 * after (a new user read "accepted after 227 ms, answered after 220 ms").
 */
export function answeredOutcome(
  r: ControlRequestRecord,
  w: Pick<Waiting, "requestId" | "started">,
  acceptedAt: number | undefined,
  now: number,
): ControlOutcome {
  if (r.state === "refused") {
    return {
      kind: "refused",
      requestId: w.requestId,
      error: r.error ?? unknownRefusal,
      ...(r.acceptedBy ? { by: r.acceptedBy } : {}),
    };
  }
  const answered = r.answeredAt ? Date.parse(r.answeredAt) : now;
  return {
    kind: "done",
    requestId: w.requestId,
    result: r.result ?? {},
    by: r.acceptedBy ?? "",
    acceptedAfterMs: Math.max(0, Math.min(acceptedAt ?? answered, answered) - w.started),
    answeredAfterMs: Math.max(0, answered - w.started),
  };
}

const unknownRefusal: ControlRefusal = { code: "internal", message: "The owner refused the request.", details: {} };

async function removeAnswered(authority: RunStateAuthority, w: Waiting, revision: number): Promise<void> {
  await authority.delete(w.projectId, CONTROL_REQUEST_KIND, w.id, revision).catch(() => false);
}
