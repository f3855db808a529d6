/**
 * The floor of the overhead benchmarks (issue 7, figures 1 and 2): a minimal Node process speaking newline-delimited
 * JSON-RPC on stdin/stdout. Every request is parsed and answered; notifications are ignored. It loads nothing but
 * Node's built-ins, so spawn-to-first-answer and round trips through it are what any Node NDJSON server pays at least
 * on this machine.
 *
 *   node echo-server.js                 answers every request with its own params as the result (cold start)
 *   node echo-server.js --answer FILE   answers every request with the JSON text in FILE as the result (issue 34,
 *                                       "echo1k"): the request figures give it the server's own `product.status`
 *                                       answer, so both processes read the same requests and write the same bytes
 *
 * The least any server must do per request: read and split the input, parse each line (`JSON.parse`, for its id) and
 * write the answer. The `--answer` text is read once and written as it is, the id spliced in front of it (the server,
 * too, keeps the text of an unchanged `product.status` answer rather than serialising it again). The answers to the
 * lines of one input chunk are written together, in one `write` once the chunk is read (`process.nextTick`), so a
 * burst of pipelined requests costs the floor a few system calls rather than one per answer, as the server's framed
 * writer batches the frames of a turn; a single request is still answered in the turn it arrived.
 *
 * Run compiled, with plain `node` (the benchmark compiles test/bench/ first), exactly as the server is run from dist/.
 * It must never print anything but responses on stdout; it exits when stdin closes.
 */
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const answerAt = process.argv.indexOf("--answer");
const answerFile = answerAt >= 0 ? process.argv[answerAt + 1] : undefined;
/** What follows the id in every answer when there is an `--answer` file: the result member and the line's end. */
const answerTail = answerFile === undefined ? undefined : `,"result":${readFileSync(answerFile, "utf8").trim()}}\n`;

/** Answers to the input chunk being read, written together once it is done (see the header). */
let pending = "";
const flush = (): void => {
  process.stdout.write(pending);
  pending = "";
};

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  const message = JSON.parse(line) as { id?: string | number; params?: unknown };
  if (message.id === undefined) return;
  if (pending === "") process.nextTick(flush);
  pending +=
    answerTail === undefined
      ? `${JSON.stringify({ jsonrpc: "2.0", id: message.id, result: message.params ?? {} })}\n`
      : `{"jsonrpc":"2.0","id":${JSON.stringify(message.id)}${answerTail}`;
});
lines.on("close", () => {
  if (pending !== "") flush();
  process.exit(0);
});
