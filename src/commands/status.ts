/**
 * `acp-orchestrator status ID`: one product (tasks, attempts, durations, errors, budget, checkpoints, recovery) or one
 * goal run (criteria, phases) as `product.status` / `x/goal.status` would report it (issue 15). Reads only.
 */
import { storeFlags } from "../operator/cli-verbs.js";
import { formatGoalStatus, formatProductStatus } from "../operator/format.js";
import { orNotFound } from "../operator/not-found.js";
import { productCwd } from "../operator/product-git.js";
import { mergeLeftOpen, type IntegrationLike } from "../operator/integration-text.js";
import { mergedSinceDeferral } from "../operator/product-merge.js";
import { openReader } from "../operator/open-reader.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import type { Command } from "./command.js";
import { commandFlags } from "./drive.js";
import { writeOut } from "./output.js";

const OPTIONS = { state: { type: "string" }, json: { type: "boolean" } } as const;

export const statusCommand: Command = {
  name: "status",
  options: OPTIONS,
  synopsis: "status ID [--state PATH|URL] [--json]",
  summary: "show a product or goal run: tasks, durations, errors, budget, checkpoints, recovery",
  help: `Usage: acp-orchestrator status ID [--state PATH|URL] [--json]

Shows the product (prd_…) or goal run (goal_…) ID: for a product its phase, each task's status, attempts,
duration, agent, dependencies, error and last output line, the budget, the checkpoints and the recovery advice;
for a goal run its acceptance criteria and phases. Reads only: safe while a server is driving it.

Options:
  --state PATH|URL  the store (default: $ACP_ORCHESTRATOR_STATE, else the user's state file)
  --json            print the product.status (or x/goal.status) result as JSON, with "checkpointList"
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("status", argv, OPTIONS);
    expectPositionals("status", positionals, 1, 1, "a product or goal run id");
    const id = positionals[0] as string;
    const { reader, where } = await openReader(values.state);
    try {
      return await orNotFound(where, async () => {
        if (reader.isGoalId(id)) {
          const status = await reader.goalStatus(id);
          await writeOut(values.json ? `${JSON.stringify(status, null, 2)}\n` : formatGoalStatus(status));
          return 0;
        }
        const status = await reader.productStatus(id);
        const checkpoints = await reader.checkpoints(id);
        // The resume (and retry, ...) commands the recovery names carry the store and the agent config the run used,
        // as run's own hint does (a new user's trial: status's hint had no --config, so resume ran other agents).
        const configPath = await reader.recordedConfigPath(id);
        const recoveryFlags = commandFlags({
          ...(values.state !== undefined ? { state: values.state } : {}),
          ...(configPath !== undefined ? { config: configPath } : {}),
        });
        // Where the product ran (its `created` event), read only when status prints a `merge` command naming it.
        const open = !values.json && mergeLeftOpen(status.integration as IntegrationLike | undefined, status.phase);
        const cwd = open ? await productCwd(reader, id).catch(() => undefined) : undefined;
        await writeOut(
          values.json
            ? `${JSON.stringify({ ...status, checkpointList: checkpoints }, null, 2)}\n`
            : formatProductStatus(
                { ...status, ...(cwd !== undefined ? { cwd } : {}) },
                checkpoints,
                Date.now(),
                storeFlags(values.state),
                cwd !== undefined && (await mergedSinceDeferral(status, cwd)),
                recoveryFlags,
              ),
        );
        return 0;
      });
    } finally {
      await reader.close();
    }
  },
};
