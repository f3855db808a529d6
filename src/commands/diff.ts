/**
 * `acp-orchestrator diff ID [TASK]` and `acp-orchestrator merge ID` (issue 29): review a product's (or one task's)
 * change against its base through git, coloured on a terminal; bring a finished `branch`-mode product into the branch
 * checked out in the current directory with the rules of `integration.mode: merge` (the workspace adapter's
 * target-merge.ts: fast-forward or merge commit, never a rewrite; deferred, with nothing touched, while a merge,
 * rebase, cherry-pick, revert or bisect is in progress or uncommitted changes are in the way).
 *
 * `diff` reads only. `merge` moves only the user's branch (it records nothing in the store: the product is finished).
 */
import { resolve } from "node:path";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { orNotFound } from "../operator/not-found.js";
import { openReader } from "../operator/open-reader.js";
import { ChangeUnavailable, changeRange, diffText } from "../operator/product-git.js";
import { mergeProduct } from "../operator/product-merge.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

const refuse = (err: unknown): number => {
  if (!(err instanceof ChangeUnavailable)) throw err;
  process.stderr.write(`acp-orchestrator: ${err.message}\n`);
  return 1;
};

const DIFF_OPTIONS = {
  state: { type: "string" },
  stat: { type: "boolean" },
  color: { type: "boolean" },
  "no-color": { type: "boolean" },
} as const;

const MERGE_OPTIONS = { state: { type: "string" }, cwd: { type: "string" } } as const;

export const diffCommand: Command = {
  name: "diff",
  options: DIFF_OPTIONS,
  synopsis: "diff ID [TASK] [--state PATH|URL] [--stat] [--color|--no-color]",
  summary: "show a product's or a task's change against its base (git diff, coloured on a terminal)",
  help: `Usage: acp-orchestrator diff ID [TASK] [--state PATH|URL] [--stat] [--color|--no-color]

Shows what product ID changed (from the commit its first tasks started on, which
retry and rollback do not move, to its integration branch), or what
task TASK's last attempt changed (from its base to its commit), as a git diff with a summary of the files first.
Coloured when stdout is a terminal. Reads only. Needs a product that ran with worktree isolation (a git workspace).

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --stat            only the summary of changed files
  --color, --no-color  force or suppress colours
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("diff", argv, DIFF_OPTIONS);
    expectPositionals("diff", positionals, 1, 2, "a product id (and optionally a task id)");
    const [productId, taskId] = positionals as [string, string | undefined];
    const { reader, where } = await openReader(values.state);
    try {
      return await orNotFound(where, async () => {
        try {
          const range = await changeRange(reader, productId, taskId);
          const color = values["no-color"] ? false : values.color === true || process.stdout.isTTY === true;
          let text = await diffText(range, { color });
          if (values.stat) text = text.slice(0, Math.max(0, text.indexOf("\ndiff --git") + 1) || text.length);
          await writeOut(text === "" ? `no change in ${range.what}\n` : text);
          return 0;
        } catch (err) {
          return refuse(err);
        }
      });
    } finally {
      await reader.close();
    }
  },
};

export const mergeCommand: Command = {
  name: "merge",
  options: MERGE_OPTIONS,
  synopsis: "merge ID [--state PATH|URL] [--cwd DIR]",
  summary: "bring a finished product's branch into the branch checked out here (fast-forward or merge commit)",
  help: `Usage: acp-orchestrator merge ID [--state PATH|URL] [--cwd DIR]

Brings the integration branch of product ID (completed, integration "branch") into the branch checked out in DIR
(default: the current directory), by fast-forward or a merge commit, never by rewriting it: the same rules as
integration "merge". Nothing is changed while a merge, rebase, cherry-pick, revert or bisect is in progress, when
uncommitted changes are in files the merge changes, or on a conflict (the conflicting files are listed).
Exits 0 when merged, 1 otherwise.

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --cwd DIR         the checkout whose branch receives the product (default: the current directory)
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("merge", argv, MERGE_OPTIONS);
    expectPositionals("merge", positionals, 1, 1, "a product id");
    const productId = positionals[0] as string;
    const cwd = resolve(values.cwd ?? process.cwd());
    const { reader, where } = await openReader(values.state);
    try {
      return await orNotFound(where, async () => {
        try {
          return await merge(reader, productId, cwd);
        } catch (err) {
          return refuse(err);
        }
      });
    } finally {
      await reader.close();
    }
  },
};

async function merge(reader: Parameters<typeof mergeProduct>[0], productId: string, cwd: string): Promise<number> {
  const outcome = await mergeProduct(reader, productId, cwd);
  if (outcome.merged) {
    await writeOut(`${outcome.message}\n`);
    return 0;
  }
  process.stderr.write(`acp-orchestrator: ${outcome.message}\n`);
  return 1;
}
