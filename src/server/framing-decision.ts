/**
 * The framing of one stdio transport (PROTOCOL.md section 1): the two framings, and the decision a reader and its
 * writer share (detected once from the first bytes of the input, then used for both directions).
 *
 * Owns that decision only. Must never read or write a stream.
 */

/** The two framings of PROTOCOL.md section 1. */
export type Framing = "ndjson" | "content-length";

/** The framing shared by a reader and its writer; set once. */
export class FramingDecision {
  constructor(public value: Framing | undefined) {}
}
