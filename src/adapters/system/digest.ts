/**
 * The platform SHA-256 for the core's `Digest` port (src/core/ports.ts): `node:crypto` over the UTF-8 bytes of the
 * text, hex. Gives the same digests as the core's pure `sha256Hex` (a lone surrogate is encoded as U+FFFD by both),
 * many times faster on large inputs (a 1,000-task plan's fingerprint, every task launch's input hash).
 */
import type * as Crypto from "node:crypto";
import { nodeCrypto } from "./node-builtins.js";
import type { Digest } from "../../core/ports.js";

type OneShot = (text: string) => string;

/**
 * The hashing function, chosen on the first digest (node:crypto is loaded then, not at import: cold start, issue 34):
 * the one-shot `crypto.hash` where Node has it (20.12+), about 2-4x cheaper per short text than a `Hash` object
 * (issue 34: one per task launch); `createHash` otherwise. Same digests either way.
 */
const chosen: { fn?: OneShot } = {};

function choose(): OneShot {
  const crypto: typeof Crypto = nodeCrypto();
  const hash = (crypto as { hash?: typeof Crypto.hash }).hash;
  chosen.fn =
    typeof hash === "function"
      ? (text) => hash("sha256", text, "hex")
      : (text) => crypto.createHash("sha256").update(text, "utf8").digest("hex");
  return chosen.fn;
}

/** SHA-256 of the UTF-8 encoding of `text`, 64 lower-case hex digits. Pure. */
export const nodeSha256Hex: Digest = (text) => (chosen.fn ?? choose())(text);
