/**
 * Product headers read back from their stored JSON text (issue 32: `product.list` of 100,000 stored products on
 * PostgreSQL, where a `ProductHeaderRecord.safeParse` of each header was a third of the time).
 *
 * The schema stays the judge (guarantee 4): `parseHeaderText` answers what `ProductHeaderRecord.safeParse` of the
 * parsed text answers. A header whose members all hold values of the schema's types and bounds is checked here
 * member by member and copied in the schema's member order without any other member, as the schema returns it;
 * anything else (a missing or odd member) goes to the schema itself, which gives the answer and the reason. So the
 * quick check only ever accepts what the schema accepts, with the same result (test/core/product/header-text.test.ts
 * compares them).
 * Pure: no I/O. Never throws.
 */
import { Phase } from "../../../protocol/common.js";
import { ProductHeaderRecord } from "./records.js";

/** A parsed JSON object whose members are not known yet. */
type Loose = Record<string, unknown>;

/**
 * The header `text` holds, as `ProductHeaderRecord.safeParse(JSON.parse(text))` returns it, or `undefined` when the
 * text is not JSON or the schema refuses it.
 */
export function parseHeaderText(text: string): ProductHeaderRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const quick = quickHeader(value);
  if (quick !== undefined) return quick;
  const parsed = ProductHeaderRecord.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

/**
 * `value` as the schema returns it when every member the schema names holds a value of its type and bounds; else
 * `undefined` (the schema decides). Exported for the test that compares it with the schema.
 */
export function quickHeader(value: unknown): ProductHeaderRecord | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  // The schema reads its members by name and leaves any other out (zod's default: strip), so neither do we.
  const { v, productId, projectId, name, phase, progress, createdAt, updatedAt, sessionId } = value as Loose;
  if (
    v !== 1 ||
    !isId(productId) ||
    !isId(projectId) ||
    typeof name !== "string" ||
    !(Phase.options as readonly unknown[]).includes(phase)
  ) {
    return undefined;
  }
  if (!isTimestamp(createdAt) || !isTimestamp(updatedAt)) return undefined;
  if (sessionId !== undefined && typeof sessionId !== "string") return undefined;
  if (typeof progress !== "object" || progress === null || Array.isArray(progress)) return undefined;
  const { total, completed, running, failed, pending } = progress as Loose;
  if (!isCount(total) || !isCount(completed) || !isCount(running) || !isCount(failed) || !isCount(pending)) {
    return undefined;
  }
  const header: ProductHeaderRecord = {
    v: 1,
    productId,
    projectId,
    name,
    phase: phase as ProductHeaderRecord["phase"],
    progress: { total, completed, running, failed, pending },
    createdAt,
    updatedAt,
  };
  if (sessionId !== undefined) header.sessionId = sessionId;
  return header;
}

/** The schema's `Id`: 1 to 200 code units, no C0 control character. */
function isId(s: unknown): s is string {
  if (typeof s !== "string" || s.length < 1 || s.length > 200) return false;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) < 0x20) return false;
  return true;
}

/** The schema's `Timestamp`: a non-empty string. */
function isTimestamp(s: unknown): s is string {
  return typeof s === "string" && s.length > 0;
}

/** The schema's `Count`: an integer from 0 to `Number.MAX_SAFE_INTEGER`. */
function isCount(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER;
}
