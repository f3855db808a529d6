/**
 * `acp-orchestrator list`: the products and goal runs of a store, with phase, progress, owner liveness and when each
 * last changed (issue 15). Reads only (guarantee 3); works while a server owns the products.
 */
import { openReader } from "../operator/open-reader.js";
import { formatList } from "../operator/format.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

const OPTIONS = { state: { type: "string" }, json: { type: "boolean" } } as const;

export const listCommand: Command = {
  name: "list",
  synopsis: "list [--state PATH|URL] [--json]",
  summary: "list the products and goal runs of a store",
  help: `Usage: acp-orchestrator list [--state PATH|URL] [--json]

Lists every product (phase, progress, lease owner and whether its lease is live, last update) and every goal run
of the store. Reads only: safe while a server is driving the products.

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --json            print {"products": [...], "goals": [...]} as JSON
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("list", argv, OPTIONS);
    expectPositionals("list", positionals, 0, 0, "no arguments");
    const { reader } = await openReader(values.state);
    try {
      const [products, goals] = [await reader.listProducts(), await reader.listGoals()];
      await writeOut(
        values.json ? `${JSON.stringify({ products, goals }, null, 2)}\n` : formatList(products, goals, Date.now()),
      );
      return 0;
    } finally {
      await reader.close();
    }
  },
};
