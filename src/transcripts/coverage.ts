/**
 * What a set of transcripts covers (protocol/TRANSCRIPTS.md, "Coverage"): which requests were answered with a result
 * or with which error code, which error codes appear at all, which server → client messages are expected and which
 * client notifications are sent. Derived from the lines themselves, so a coverage claim cannot drift from what is
 * replayed.
 *
 * Owns the derivation only. It must never decide what is required (the coverage test holds that list) and never
 * count a pattern placeholder as coverage: only literal method names, ids and error codes count.
 */
import { isOperator, type Json, type Transcript } from "./format.js";

/** The outcome of one request: `"result"` or a numeric error code. */
export type Outcome = "result" | number;

export interface Coverage {
  /** Bare method name → outcomes seen (a `recv` line with the request's literal id and a literal result/error code). */
  readonly requests: ReadonlyMap<string, ReadonlySet<Outcome>>;
  /** Every literal `error.code` in any `recv` line (transport errors answer with `id: null`, so they count here). */
  readonly errorCodes: ReadonlySet<number>;
  /** Bare names of server → client notifications and requests expected by `recv` lines. */
  readonly serverMessages: ReadonlySet<string>;
  /** Bare names of client → server notifications sent. */
  readonly clientNotifications: ReadonlySet<string>;
  /** Literal `params.update.sessionUpdate` kinds of expected ACP `session/update` notifications (PROTOCOL.md section 4). */
  readonly sessionUpdates: ReadonlySet<string>;
  /**
   * For each item above, the transcripts that cover it (`request:M:outcome`, `error:C`, `server:M`, `client:M`,
   * `update:K`).
   */
  readonly sources: ReadonlyMap<string, readonly string[]>;
}

/** `_product.plan` → `product.plan` (the ACP extension spelling, PROTOCOL.md section 2); other names unchanged. */
export function bareName(method: string): string {
  return method.startsWith("_") && /[./]/.test(method) ? method.slice(1) : method;
}

function literal(value: Json | undefined): Json | undefined {
  return value !== undefined && !isOperator(value) ? value : undefined;
}

/** The literal `update.sessionUpdate` of a `session/update` notification's params, if any. */
function sessionUpdateKind(params: Json | undefined): string | undefined {
  const p = literal(params);
  if (typeof p !== "object" || p === null || Array.isArray(p)) return undefined;
  const update = literal(p.update);
  if (typeof update !== "object" || update === null || Array.isArray(update)) return undefined;
  const kind = literal(update.sessionUpdate);
  return typeof kind === "string" ? kind : undefined;
}

/** Derives the coverage of `transcripts` (see `Coverage`). Pure. */
export function coverageOf(transcripts: readonly Transcript[]): Coverage {
  const requests = new Map<string, Set<Outcome>>();
  const errorCodes = new Set<number>();
  const serverMessages = new Set<string>();
  const clientNotifications = new Set<string>();
  const sessionUpdates = new Set<string>();
  const sources = new Map<string, string[]>();
  const note = (key: string, source: string) => {
    const list = sources.get(key) ?? [];
    if (!list.includes(source)) list.push(source);
    sources.set(key, list);
  };
  for (const t of transcripts) {
    const pending = new Map<string, string>();
    for (const line of t.lines) {
      if (line.kind === "send") {
        const msg = line.value.msg;
        if (Array.isArray(msg)) continue;
        const method = literal(msg.method);
        if (typeof method !== "string") continue;
        const id = literal(msg.id);
        if (id === undefined) {
          clientNotifications.add(bareName(method));
          note(`client:${bareName(method)}`, t.source);
        } else {
          pending.set(JSON.stringify(id), bareName(method));
        }
      } else if (line.kind === "recv") {
        const msg = line.value.msg;
        const method = literal(msg.method);
        if (typeof method === "string") {
          serverMessages.add(bareName(method));
          note(`server:${bareName(method)}`, t.source);
          const kind = method === "session/update" ? sessionUpdateKind(msg.params) : undefined;
          if (kind !== undefined) {
            sessionUpdates.add(kind);
            note(`update:${kind}`, t.source);
          }
          continue;
        }
        const error = literal(msg.error);
        const code =
          typeof error === "object" && error !== null && !Array.isArray(error) ? literal(error.code) : undefined;
        if (typeof code === "number") {
          errorCodes.add(code);
          note(`error:${code}`, t.source);
        }
        const id = literal(msg.id);
        const requested = id === undefined ? undefined : pending.get(JSON.stringify(id));
        if (requested === undefined) continue;
        const outcome: Outcome | undefined = Object.hasOwn(msg, "result")
          ? "result"
          : typeof code === "number"
            ? code
            : undefined;
        if (outcome === undefined) continue;
        const set = requests.get(requested) ?? new Set<Outcome>();
        set.add(outcome);
        requests.set(requested, set);
        note(`request:${requested}:${outcome}`, t.source);
      }
    }
  }
  return { requests, errorCodes, serverMessages, clientNotifications, sessionUpdates, sources };
}
