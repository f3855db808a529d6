/**
 * `acp-orchestrator ui [--state PATH|URL] [--port N] [--host H] [--poll-ms N] [--max-streams N]`: serves the web
 * dashboard (src/ui/dashboard-server.ts) over one store until Ctrl-C or SIGTERM (issues 15, 29), with buttons that file
 * control requests through a writable connection to the store opened on first use; prints the URL (with the
 * per-launch key of the buttons) on stdout.
 *
 * Owns the command's options and the process's lifetime only.
 */
import { randomBytes } from "node:crypto";
import { openStore, stateLocation } from "../adapters/persistence/open-store.js";
import { ProcessLiveness } from "../adapters/system/process-liveness.js";
import type { RunStateAuthority } from "../core/ports.js";
import { printableState, shellWord } from "../operator/cli-verbs.js";
import { openReader } from "../operator/open-reader.js";
import { createLogger, type LogLevel } from "../server/logger.js";
import { startDashboard } from "../ui/dashboard-server.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";

const OPTIONS = {
  state: { type: "string" },
  port: { type: "string" },
  host: { type: "string" },
  "poll-ms": { type: "string" },
  "max-streams": { type: "string" },
  "log-level": { type: "string" },
} as const;

const LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

function integer(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`The option --${name} of "ui" must be an integer from ${min} to ${max}.`, "ui");
  }
  return n;
}

export const uiCommand: Command = {
  name: "ui",
  options: OPTIONS,
  synopsis: "ui [--state PATH|URL] [--port N] [--host H] [--poll-ms N] [--max-streams N] [--log-level LEVEL]",
  summary: "serve a live web dashboard of a store on 127.0.0.1, with buttons to steer its products",
  help: `Usage: acp-orchestrator ui [--state PATH|URL] [--port N] [--host H] [--poll-ms N] [--max-streams N] [--log-level LEVEL]

Serves a web dashboard of the store's products and goal runs until Ctrl-C: each product's task graph, whose
nodes change colour as the run progresses (no reload), each task's output, error, attempts, durations, commit and
changed files, attempt history, diffs, a timeline, the budget, recovery, integration and checkpoints; a goal run's
criteria and phases. Buttons pause, resume, cancel, confirm, answer, retry, roll back and merge through control
requests that the owning server executes (docs/OPERATOR.md). Prints the address to open: it carries this launch's
key, without which the buttons are refused (403).

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --port N          the port (default 4777; 0 picks a free one)
  --host H          the address to listen on (default 127.0.0.1; anything else exposes the store's contents)
  --poll-ms N       how often live views re-read the store (default 500)
  --max-streams N   most live views open at once (default 64; one more is refused with 503; a view whose browser
                    stops reading is disconnected after 15 s or 4 MiB unsent)
  --log-level L     trace, debug, info, warn (default), error, fatal or silent (plain log lines on stderr)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("ui", argv, OPTIONS);
    expectPositionals("ui", positionals, 0, 0, "no arguments");
    const port = integer("port", values.port, 4777, 0, 65535);
    const pollMs = integer("poll-ms", values["poll-ms"], 500, 10, 60_000);
    const maxStreams = integer("max-streams", values["max-streams"], 64, 1, 10_000);
    const level = (values["log-level"] ?? "warn") as LogLevel;
    if (!LEVELS.includes(level))
      throw new UsageError(`The option --log-level of "ui" must be one of ${LEVELS.join(", ")}.`, "ui");
    // A person runs ui: its logs are plain lines on stderr, never JSON (issue 28).
    const logger = createLogger({ level, format: "pretty" });
    const { reader, where } = await openReader(values.state);
    // The buttons' store connection: writable, opened on the first button press (control requests only).
    let authority: Promise<RunStateAuthority> | undefined;
    const control = {
      secret: randomBytes(24).toString("base64url"),
      authority: () => (authority ??= openStore(stateLocation(values.state))),
      liveness: new ProcessLiveness(),
      stateArg: shellWord(values.state !== undefined ? printableState(values.state) : where),
    };
    let dashboard;
    try {
      dashboard = await startDashboard({
        reader,
        where,
        logger,
        host: values.host ?? "127.0.0.1",
        port,
        pollMs,
        streams: { maxStreams },
        control,
      });
    } catch (err) {
      await reader.close();
      const code = (err as { code?: string }).code;
      if (code === "EADDRINUSE")
        throw new UsageError(`The port ${port} is in use: pass another with --port (0 picks a free one).`, "ui");
      throw err;
    }
    process.stdout.write(`dashboard: ${dashboard.openUrl} (store ${where}; Ctrl-C stops it)\n`);
    await new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    await dashboard.close();
    await reader.close();
    if (authority) await (await authority).close();
    return 0;
  },
};
