/**
 * The floor of the overhead benchmarks (issue 7, figures 1 and 2): a minimal Node process speaking newline-delimited
 * JSON-RPC on stdin/stdout. Every request is parsed and answered with its own params as the result; notifications
 * are ignored. It loads nothing but Node's built-ins, so spawn-to-first-answer and round trips through it are what
 * any Node NDJSON server pays at least on this machine.
 *
 * Run compiled, with plain `node` (the benchmark compiles test/bench/ first), exactly as the server is run from dist/.
 * It must never print anything but responses on stdout; it exits when stdin closes.
 */
import { createInterface } from "node:readline";

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  const message = JSON.parse(line) as { id?: string | number; params?: unknown };
  if (message.id === undefined) return;
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id: message.id, result: message.params ?? {} })}\n`);
});
lines.on("close", () => process.exit(0));
