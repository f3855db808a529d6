/**
 * `acp-orchestrator events ID [--follow] [--json]`: a product's stored event history, one line per event (or one JSON
 * object per line), optionally following new events until the product ends (issue 15). Reads only.
 */
import { TerminalPhases } from "../../protocol/common.js";
import { TERMINAL_GOAL_STATUSES } from "../core/goal/records.js";
import { formatEvent, formatGoalEvent } from "../operator/format.js";
import type { GoalEventRow, ProductEventRow } from "../operator/run-state-reader.js";
import { orNotFound } from "../operator/not-found.js";
import { openReader } from "../operator/open-reader.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

const OPTIONS = {
  state: { type: "string" },
  json: { type: "boolean" },
  follow: { type: "boolean", short: "f" },
  "poll-ms": { type: "string" },
} as const;

/**
 * Says that events `from`..`to` (inclusive) are not in the store any more (compacted history: a long product keeps a
 * snapshot, not every event), so a jump in `seq` is never silent. On stdout in text mode; with --json on stderr, so
 * stdout stays one {"seq", "event"} object per line.
 */
async function sayCompacted(from: number, to: number, json: boolean): Promise<void> {
  const count = to - from + 1;
  const line = `… ${count.toLocaleString("en-US")} event${count === 1 ? "" : "s"} compacted away (seq ${from}–${to}) …\n`;
  if (json) process.stderr.write(line);
  else await writeOut(line);
}

/** Where `events` reads: a product's or a goal run's stream, its line format, and whether it has ended. */
interface EventSource {
  read(afterSeq: number): Promise<(ProductEventRow | GoalEventRow)[]>;
  line(row: ProductEventRow | GoalEventRow): string;
  ended(): Promise<boolean>;
}

export const eventsCommand: Command = {
  name: "events",
  options: OPTIONS,
  synopsis: "events ID [--follow] [--json] [--state PATH|URL] [--poll-ms N]",
  summary: "print a product's (or goal run's) event history, optionally following it",
  help: `Usage: acp-orchestrator events ID [--follow] [--json] [--state PATH|URL] [--poll-ms N]

Prints the stored events of product ID, oldest first, one per line (an invalid record is shown as skipped); of a goal
run (goal_…) its phases, assessments and status changes (its products' events: events PRODUCT).
Events compacted away (a long history keeps a snapshot) are named by one line "… N events compacted away (seq A–B) …"
(with --json on stderr). Reads only: safe while a server is driving the product.

Options:
  --follow, -f   keep printing new events until the product completes, fails or is cancelled, or the goal run
                 ends (or Ctrl-C)
  --json         one JSON object per line: {"seq": N, "event": {...}}
  --poll-ms N    how often --follow reads the store (default 500)
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("events", argv, OPTIONS);
    expectPositionals("events", positionals, 1, 1, "a product or goal run id");
    const pollMs = values["poll-ms"] === undefined ? 500 : Number(values["poll-ms"]);
    if (!Number.isSafeInteger(pollMs) || pollMs < 10) {
      throw new UsageError(`The option --poll-ms of "events" must be an integer of at least 10.`, "events");
    }
    const id = positionals[0] as string;
    const { reader, where } = await openReader(values.state);
    // A goal run's events are its own stream (x/goal.*): its phases, assessments and status changes (a new user's
    // trial: events refused a goal run id); its products' events are `events PRODUCT`.
    const source: EventSource = reader.isGoalId(id)
      ? {
          read: (after) => reader.goalEvents(id, after, 1000),
          line: (row) => formatGoalEvent(row as GoalEventRow),
          ended: async () => {
            const { status } = (await reader.goalStatus(id)) as { status: (typeof TERMINAL_GOAL_STATUSES)[number] };
            return TERMINAL_GOAL_STATUSES.includes(status);
          },
        }
      : {
          read: (after) => reader.productEvents(id, after, 1000),
          line: (row) => formatEvent(row as ProductEventRow),
          ended: async () => {
            const { phase } = (await reader.productStatus(id)) as { phase: (typeof TerminalPhases)[number] };
            return TerminalPhases.includes(phase);
          },
        };
    let stopped = false;
    const onSignal = () => (stopped = true);
    process.once("SIGINT", onSignal);
    try {
      return await orNotFound(where, async () => {
        await source.ended(); // not_found before anything is printed
        let after = 0;
        for (;;) {
          for (;;) {
            const batch = await source.read(after);
            for (const row of batch) {
              if (row.seq > after + 1) await sayCompacted(after + 1, row.seq - 1, values.json === true);
              await writeOut(
                values.json ? `${JSON.stringify({ seq: row.seq, event: row.raw })}\n` : `${source.line(row)}\n`,
              );
              after = row.seq;
            }
            if (batch.length < 1000) break;
          }
          if (!values.follow || stopped) return 0;
          if (await source.ended()) {
            const tail = await source.read(after);
            if (tail.length === 0) return 0;
            continue;
          }
          await new Promise((resolve) => setTimeout(resolve, pollMs));
          if (stopped) return 0;
        }
      });
    } finally {
      process.off("SIGINT", onSignal);
      await reader.close();
    }
  },
};
