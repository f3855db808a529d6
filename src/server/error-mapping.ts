/**
 * Maps the core's domain errors (string codes) to the wire errors of PROTOCOL.md section 3 (numeric codes).
 * This is the only place where the two error families meet; it must never swallow an unknown error (those become
 * -32603 in the connection, with the stack in the log only).
 */
import type { ResponseError } from "vscode-jsonrpc";
import { NotFoundKind } from "../../protocol/errors.js";
import { DomainError, type ConflictDetails } from "../core/errors.js";
import { AuthorityConflict, AuthorityFailure } from "../core/ports.js";
import * as wire from "./wire-errors.js";

/** Returns the wire error for a domain error, or `undefined` for anything else (a bug → -32603). */
export function mapDomainError(err: unknown): ResponseError<unknown> | undefined {
  if (err instanceof AuthorityConflict) return wire.conflict(err.details, err.message);
  if (err instanceof AuthorityFailure) return wire.persistenceFailed(err.message, err.operation ?? "write");
  if (!(err instanceof DomainError)) return undefined;
  const e = err as DomainError;
  switch (e.code) {
    case "not_found": {
      const d = e.details as { kind: string; id: string };
      const kind = NotFoundKind.safeParse(d.kind === "goal run" ? "goalRun" : d.kind);
      return wire.notFound(kind.success ? kind.data : "product", d.id, e.message);
    }
    case "invalid_phase": {
      const d = e.details as { phase: string; allowed: string[] };
      return wire.invalidPhase(d.phase, d.allowed, e.message);
    }
    case "busy":
      return wire.busy((e.details as { productId: string }).productId, e.message);
    case "conflict":
      return wire.conflict(e.details as ConflictDetails, e.message);
    case "persistence_failed": {
      const d = e.details as { cause: string; operation?: "read" | "write" };
      return wire.persistenceFailed(d.cause, d.operation ?? "write", e.message);
    }
    case "invalid_mutation": {
      const d = e.details as { index: number; reason: string };
      return wire.invalidMutation(d.index, d.reason, e.message);
    }
    case "ownership": {
      const d = e.details as { expected: string; got: string };
      return wire.ownership(d.expected, d.got, e.message);
    }
    case "invalid_plan": {
      const d = e.details as { reason: string; index?: number; list?: "tasks" | "instances" };
      const list = d.list ?? "tasks";
      return wire.invalidParams([{ path: d.index !== undefined ? [list, d.index] : [list], message: d.reason }]);
    }
    case "invalid_input":
      return wire.invalidParams([{ path: [], message: (e.details as { reason: string }).reason }]);
  }
  return undefined;
}
