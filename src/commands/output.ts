/**
 * Writing a command's output to stdout when stdout may be a pipe (`acp-orchestrator events ID --json | wc -l`): a
 * write to a pipe is asynchronous, so a process that exits right after writing loses what is still queued. Owns
 * backpressure-aware writes and the final flush the dispatcher (src/cli.ts) waits for before it ends the process.
 */
import type { Writable } from "node:stream";

/** Writes `text` to stdout; resolves at once, or after `drain` when the stream's buffer is full (backpressure). */
export function writeOut(text: string): Promise<void> {
  return writeTo(process.stdout, text);
}

function writeTo(stream: Writable, text: string): Promise<void> {
  if (stream.write(text)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      stream.off("error", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("close", done);
    stream.once("error", done);
  });
}

/**
 * Resolves when everything written so far to `stream` has been handed to the OS (an empty write's callback runs
 * after the queued ones), or when the stream is closed or broken (a reader that went away: nothing more to wait for).
 */
export function flushed(stream: Writable): Promise<void> {
  if (stream.destroyed || stream.writableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once("error", () => resolve());
    stream.write("", () => resolve());
  });
}
