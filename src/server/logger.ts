/**
 * The server's structured logger: pino writing synchronously to stderr (fd 2) or to a log file.
 *
 * Owns: building the one pino instance the process uses, and adapting a logger to vscode-jsonrpc's. Must never write to stdout (fd 1): stdout carries protocol
 * frames only (PROTOCOL.md section 1).
 */
import pino from "pino";
import type { Logger as JsonRpcLogger } from "vscode-jsonrpc/node";
import type { Logger } from "../core/ports.js";
import { humanLogLine } from "./log-lines.js";

/** Log levels accepted by `createLogger` (pino's, plus `silent`). */
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";

export interface LoggerOptions {
  /** Minimum level written; `silent` writes nothing. */
  level: LogLevel;
  /** Absolute or relative path of a log file (appended to, parent directories created). Default: stderr. */
  file?: string;
  /** Static fields added to every line. Default: `{pid}`. */
  base?: Record<string, unknown>;
  /**
   * `json` (default): pino's JSON lines, for machines (`serve`). `pretty`: one human line each (log-lines.ts), for
   * the commands a person runs (issue 28: human commands print human lines only).
   */
  format?: LogFormat;
}

/** How log lines are written: JSON for machines, or human lines. */
export type LogFormat = "json" | "pretty";

/** The log formats `serve --log-format` accepts. */
export const LOG_FORMATS: readonly LogFormat[] = ["json", "pretty"];

/** The logger `createLogger` returns: the core's `Logger` port plus `flush()` for shutdown. */
export interface ServerLogger extends Logger {
  /** Writes out anything buffered. With the sync destination used here it is a cheap no-op; call it before exit. */
  flush(): void;
  child(bindings: object): ServerLogger;
}

/**
 * Creates the process logger: JSON lines (or, with format `pretty`, one human line each) through a synchronous pino
 * destination, so nothing is lost when the process exits right after logging.
 *
 * Writes to fd 2 unless `file` is given; never to stdout. Errors under the `err` key are serialised with their stack.
 * Throws if `file` cannot be opened.
 */
export function createLogger(options: LoggerOptions): ServerLogger {
  const json =
    options.file === undefined
      ? pino.destination({ dest: 2, sync: true })
      : pino.destination({ dest: options.file, sync: true, mkdir: true, append: true });
  // Pretty: each JSON line pino makes is rewritten as a human line and written synchronously to the same place.
  const destination =
    options.format === "pretty" ? { write: (line: string) => void json.write(humanLogLine(line)) } : json;
  return pino(
    {
      level: options.level,
      base: options.base ?? { pid: process.pid },
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
}

/**
 * Adapts the project logger to vscode-jsonrpc's `Logger`, so the library never writes to the console (stdout).
 * Library `log` lines go to debug.
 */
export function jsonRpcLogger(logger: Logger): JsonRpcLogger {
  const bindings = { source: "vscode-jsonrpc" };
  return {
    error: (message) => logger.error(bindings, message),
    warn: (message) => logger.warn(bindings, message),
    info: (message) => logger.info(bindings, message),
    log: (message) => logger.debug(bindings, message),
  };
}
