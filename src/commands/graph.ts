/**
 * `acp-orchestrator graph ID [--format mermaid|dot]`: a product's DAG with each task's status, as a Mermaid flowchart
 * or Graphviz DOT (issue 15). Reads only.
 */
import { toDot, toMermaid } from "../operator/format.js";
import { orNotFound } from "../operator/not-found.js";
import { openReader } from "../operator/open-reader.js";
import type { TaskState } from "../../protocol/common.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import { UsageError } from "../cli-kit/errors.js";
import type { Command } from "./command.js";
import { writeOut } from "./output.js";

const OPTIONS = { state: { type: "string" }, format: { type: "string" } } as const;

export const graphCommand: Command = {
  name: "graph",
  options: OPTIONS,
  synopsis: "graph ID [--format mermaid|dot] [--state PATH|URL]",
  summary: "print a product's DAG as Mermaid or Graphviz DOT",
  help: `Usage: acp-orchestrator graph ID [--format mermaid|dot] [--state PATH|URL]

Prints the DAG of product ID (its tasks, their dependencies and statuses) as a Mermaid flowchart (default) or
Graphviz DOT (render with: acp-orchestrator graph ID --format dot | dot -Tsvg > dag.svg). Reads only.
`,
  async run(argv) {
    const { values, positionals } = parseCommandArgs("graph", argv, OPTIONS);
    expectPositionals("graph", positionals, 1, 1, "a product id");
    const format = values.format ?? "mermaid";
    if (format !== "mermaid" && format !== "dot") {
      throw new UsageError(`The option --format of "graph" is "mermaid" or "dot", not "${format}".`, "graph");
    }
    const { reader, where } = await openReader(values.state);
    try {
      const id = positionals[0] as string;
      if (reader.isGoalId(id)) {
        throw new UsageError(
          `"graph" draws a product's DAG, and ${id} is a goal run: "acp-orchestrator status ${id}" names its phases' products.`,
          "graph",
        );
      }
      return await orNotFound(where, async () => {
        const status = (await reader.productStatus(positionals[0] as string)) as {
          tasks: TaskState[];
          plan?: { tasks: TaskState[] };
        };
        const tasks = status.tasks.length > 0 ? status.tasks : (status.plan?.tasks ?? []);
        await writeOut(format === "dot" ? toDot(tasks) : toMermaid(tasks));
        return 0;
      });
    } finally {
      await reader.close();
    }
  },
};
