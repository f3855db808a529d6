/**
 * Node built-in modules required on first use rather than when the importing module loads (issue 34, cold start):
 * `serve` answers `initialize` without running a git command, hashing or making an id, and loading `node:crypto` and
 * `node:child_process` cost it a few milliseconds of CPU each before that answer. Each accessor returns the module
 * itself (Node caches it after the first call); call it where the function is used, never at a module's top level.
 *
 * Owns nothing else; imports nothing but `node:module`.
 */
import type * as ChildProcess from "node:child_process";
import type * as Crypto from "node:crypto";
import type * as V8 from "node:v8";
import { createRequire } from "node:module";

const load = createRequire(import.meta.url);

/** `node:crypto`, loaded on the first call. */
export function nodeCrypto(): typeof Crypto {
  return load("node:crypto") as typeof Crypto;
}

/** `node:child_process`, loaded on the first call. */
export function nodeChildProcess(): typeof ChildProcess {
  return load("node:child_process") as typeof ChildProcess;
}

/** `node:v8`, loaded on the first call. */
export function nodeV8(): typeof V8 {
  return load("node:v8") as typeof V8;
}
