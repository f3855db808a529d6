/**
 * `acp-orchestrator list`: the products and goal runs of a store, with phase, progress, owner liveness and when each
 * last changed (issue 15). Reads only (guarantee 3); works while a server owns the products.
 */
import { openReader } from "../operator/open-reader.js";
import { formatList } from "../operator/format.js";
import { LIST_LIMIT_MAX, decodeListCursor, type ListPosition } from "../../protocol/product.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

const OPTIONS = {
  state: { type: "string" },
  json: { type: "boolean" },
  limit: { type: "string" },
  cursor: { type: "string" },
} as const;

export const listCommand: Command = {
  name: "list",
  options: OPTIONS,
  synopsis: "list [--state PATH|URL] [--json] [--limit N [--cursor C]]",
  summary: "list the products and goal runs of a store",
  help: `Usage: acp-orchestrator list [--state PATH|URL] [--json] [--limit N [--cursor C]]

Lists every product (phase, progress, lease owner and whether its lease is live, last update) and every goal run
of the store. Reads only: safe while a server is driving the products.

With --limit, one page of products in creation order (oldest first), then the command that prints the next page
when more remain; goal runs are listed on the first page only.

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --json            print {"products": [...], "goals": [...]} as JSON (with --limit, and "nextCursor" when more remain)
  --limit N         at most N products (1 to ${LIST_LIMIT_MAX})
  --cursor C        the page after the one that printed C (needs --limit)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("list", argv, OPTIONS);
    expectPositionals("list", positionals, 0, 0, "no arguments");
    const page = pageOption(values.limit, values.cursor);
    const { reader } = await openReader(values.state);
    try {
      if (page === undefined) {
        const [products, goals] = [await reader.listProducts(), await reader.listGoals()];
        await writeOut(
          values.json ? `${JSON.stringify({ products, goals }, null, 2)}\n` : formatList(products, goals, Date.now()),
        );
        return 0;
      }
      const { rows, nextCursor } = await reader.listProductsPage(page.limit, page.after);
      const goals = page.after === undefined ? await reader.listGoals() : [];
      if (values.json) {
        await writeOut(
          `${JSON.stringify({ products: rows, goals, ...(nextCursor ? { nextCursor } : {}) }, null, 2)}\n`,
        );
        return 0;
      }
      const more = nextCursor
        ? `\nMore products: acp-orchestrator list --limit ${page.limit} --cursor ${nextCursor}` +
          `${values.state === undefined ? "" : " (and the same --state)"}\n`
        : "";
      await writeOut(`${formatList(rows, goals, Date.now())}${more}`);
      return 0;
    } finally {
      await reader.close();
    }
  },
};

/** The page `--limit` / `--cursor` ask for, `undefined` without `--limit`. Throws `UsageError` naming the option. */
function pageOption(
  limit: string | undefined,
  cursor: string | undefined,
): { limit: number; after?: ListPosition } | undefined {
  if (limit === undefined) {
    if (cursor !== undefined) throw new UsageError(`The option --cursor of "list" needs --limit.`, "list");
    return undefined;
  }
  const n = Number(limit);
  if (!/^\d+$/.test(limit) || !Number.isSafeInteger(n) || n < 1 || n > LIST_LIMIT_MAX) {
    throw new UsageError(`The option --limit of "list" must be an integer from 1 to ${LIST_LIMIT_MAX}.`, "list");
  }
  if (cursor === undefined) return { limit: n };
  const after = decodeListCursor(cursor);
  if (after === undefined)
    throw new UsageError(`The option --cursor of "list" is not a cursor that list printed.`, "list");
  return { limit: n, after };
}
