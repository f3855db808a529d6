/**
 * A product header's `product.list` entry cut straight out of its stored JSON text (issue 32: `product.list` of
 * 100,000 stored products; parsing every header into objects and serialising every entry again, and the garbage
 * both left, were most of the answer's time).
 *
 * Only the written form is cut: the text `JSON.stringify` gives for a header as ProductStore.writeHeader writes it
 * (no white space; members `v`, `productId`, `projectId`, `name`, `phase`, `progress` with `total`, `completed`,
 * `running`, `failed`, `pending`, `createdAt`, `updatedAt`, optionally `sessionId`, in that order, nothing else),
 * where no string holds a `"`, a `\`, a C0 control character, a UTF-16 surrogate or U+2028/U+2029 (so none needs an
 * escape, each decodes to itself, and the answer's framing has nothing to escape in it, json-text.ts), `v` is 1, ids
 * are 1 to 200 characters, the phase is one of protocol's `Phase`, timestamps are not empty and each count is `0` or a
 * plain integer of at most 15 digits: one regular expression (`writtenForm`), run natively. Such a text is JSON whose value
 * `ProductHeaderRecord` accepts unchanged (nothing stripped, nothing rewritten), so `parseHeaderText` returns that
 * header, and `JSON.stringify` of its list entry is exactly the text cut here (test/core/product/header-entry.test.ts
 * checks both on every variant). Any other text is not cut (`undefined`): the caller parses it (header-text.ts),
 * which decides whether it is a header at all.
 * Pure: no I/O. Never throws.
 */
import { Phase } from "../../../protocol/common.js";

/**
 * A header cut from its text: what the list orders and filters by, and where its list entry lies in `text`. The
 * entry's JSON text is `{`, `text` from `ENTRY_START` to `membersEnd` (`"productId":…,"progress":{…}`), `text` from
 * `updatedStart` to `updatedEnd` (`,"updatedAt":"…"`), `}` (PROTOCOL.md section 5: `productId`, `projectId`, `name`,
 * `phase`, `progress`, `updatedAt`; no `owner`), as `JSON.stringify` writes that entry (`entryJson`). Positions, not
 * copies: 100,000 of these live until the answer is written (issue 32).
 */
export interface HeaderEntry {
  productId: string;
  createdAt: string;
  phase: Phase;
  /** The stored text it was cut from (also parsed after all for the few entries a caller rewrites). */
  text: string;
  membersEnd: number;
  updatedStart: number;
  updatedEnd: number;
}

/** Where the entry's first member (`"productId":`) starts in a cut text. */
export const ENTRY_START = '{"v":1,'.length;

/** The JSON text of `entry`'s list entry. */
export function entryJson(entry: HeaderEntry): string {
  const { text } = entry;
  return `{${text.slice(ENTRY_START, entry.membersEnd)}${text.slice(entry.updatedStart, entry.updatedEnd)}}`;
}

/** A JSON string's characters that need no escape and decode to themselves (no U+2028/U+2029 either: see above). */
const PLAIN = '[^"\\\\\\u0000-\\u001f\\ud800-\\udfff\\u2028\\u2029]';
/** A count `JSON.stringify` writes: `0`, or 1 to 15 digits without a leading zero (always a safe integer). */
const COUNT = "(?:0|[1-9][0-9]{0,14})";

/** The written form (see the module), built from protocol's `Phase` on first use (read once: issue 32). */
const WRITTEN: { form?: RegExp; phases?: readonly Phase[] } = {};

function writtenForm(): RegExp {
  const phases = (WRITTEN.phases ??= Phase.options);
  const counts = ["total", "completed", "running", "failed", "pending"].map((c) => `"${c}":${COUNT}`).join(",");
  return (WRITTEN.form ??= new RegExp(
    `^\\{"v":1,"productId":"${PLAIN}{1,200}","projectId":"${PLAIN}{1,200}","name":"${PLAIN}*",` +
      `"phase":"(?:${phases.join("|")})","progress":\\{${counts}\\},"createdAt":"${PLAIN}+","updatedAt":"${PLAIN}+"` +
      `(?:,"sessionId":"${PLAIN}*")?\\}$`,
  ));
}

const PRODUCT_AT = '{"v":1,"productId":"'.length;
const PHASE = '","phase":"';
const CREATED = '},"createdAt":"';
const UPDATED = '","updatedAt":"';

/** The entry cut from `text` when it is a header in the written form (see the module); else `undefined`. */
export function cutHeaderEntry(text: string): HeaderEntry | undefined {
  if (!(WRITTEN.form ?? writtenForm()).test(text)) return undefined;
  // The form holds: every string ends at the next `"`, so each member is found by its name and that quote.
  const productEnd = text.indexOf('"', PRODUCT_AT);
  const phaseStart = text.indexOf(PHASE, productEnd) + PHASE.length;
  const membersEnd = text.indexOf(CREATED, phaseStart) + 1;
  const createdEnd = text.indexOf('"', membersEnd - 1 + CREATED.length);
  const updatedEnd = text.indexOf('"', createdEnd + UPDATED.length) + 1;
  return {
    productId: text.slice(PRODUCT_AT, productEnd),
    createdAt: text.slice(membersEnd - 1 + CREATED.length, createdEnd),
    phase: phaseNamed(text, phaseStart),
    text,
    membersEnd,
    updatedStart: createdEnd + 1,
    updatedEnd,
  };
}

/** The phase named at `from` (the form holds one there, followed by `"`). */
function phaseNamed(text: string, from: number): Phase {
  const phases = WRITTEN.phases as readonly Phase[];
  for (let i = 0; i < phases.length; i++) {
    const phase = phases[i] as Phase;
    if (text.charCodeAt(from + phase.length) === 0x22 && text.startsWith(phase, from)) return phase;
  }
  return phases[0] as Phase; // unreachable: the form names a phase
}
