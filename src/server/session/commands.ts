/**
 * The session's slash commands (PROTOCOL.md section 4): `/status`, `/pause`, `/resume`, `/cancel`, `/checkpoint`,
 * `/rollback [checkpoint id]`, `/replay <task id>`, `/goal <goal>`, announced by `available_commands_update`.
 *
 * A prompt whose text starts with `/name` runs that command on the session's current product or goal run. Its answer
 * is an agent message and the turn ends with `end_turn`, except `/resume` and `/goal`, whose turns run like a
 * prompt's (the host follows them). A command the current phase does not allow answers with the reason as a message,
 * never as a JSON-RPC error.
 */
import type { AvailableCommand } from "../../../protocol/acp.js";
import { isDomainError } from "../../core/errors.js";
import type { GoalService } from "../../core/goal/service.js";
import type { ProductOrchestrator } from "../../core/product/orchestrator.js";
import type { ProductService } from "../../core/product/service.js";

export const COMMANDS: AvailableCommand[] = [
  { name: "status", description: "Show the current product's or goal run's phase and progress." },
  { name: "pause", description: "Pause the current product or goal run (running tasks stop)." },
  { name: "resume", description: "Resume the paused product or goal run and follow it." },
  { name: "cancel", description: "Cancel the current product, or stop the current goal run, for good." },
  { name: "checkpoint", description: "Take a checkpoint of the current product." },
  {
    name: "rollback",
    description: "Roll the current product back to a checkpoint.",
    input: { hint: "a checkpoint id, or nothing for the latest" },
  },
  { name: "replay", description: "Run a task (and what depends on it) again.", input: { hint: "a task id" } },
  { name: "goal", description: "Start a goal run with this goal, whatever the mode.", input: { hint: "the goal" } },
];

export type CommandName = "status" | "pause" | "resume" | "cancel" | "checkpoint" | "rollback" | "replay" | "goal";

/** `{name, argument}` when `text` is `/name …` of a known command, else `undefined` (the text is a plain prompt). */
export function parseCommand(text: string): { name: CommandName; argument: string } | undefined {
  const match = /^\/([a-z]+)(?:\s+([\s\S]*))?$/i.exec(text.trim());
  if (!match) return undefined;
  const name = match[1]!.toLowerCase();
  if (!COMMANDS.some((c) => c.name === name)) return undefined;
  return { name: name as CommandName, argument: (match[2] ?? "").trim() };
}

/** What a command needs from the session adapter. */
export interface CommandHost {
  products: ProductService;
  goals: GoalService;
  /** The session's current product, if any (the goal run's current phase product when a goal run is current). */
  product(): Promise<ProductOrchestrator | undefined>;
  /** The session's current goal run id, if a goal run is the current work. */
  goalRunId(): string | undefined;
  /** Says an agent message in the turn. */
  say(text: string): void;
  /** Runs the rest of the turn following the product (after a resume). */
  followProduct(product: ProductOrchestrator): Promise<"end_turn" | "cancelled">;
  /** Runs the rest of the turn following the goal run. */
  followGoal(goalRunId: string): Promise<"end_turn" | "cancelled">;
  /** Starts a goal run with `goal` and follows it. */
  startGoal(goal: string): Promise<"end_turn" | "cancelled">;
}

/** Runs one command; domain errors (wrong phase, unknown task or checkpoint) become the turn's message. */
export async function runCommand(
  host: CommandHost,
  name: CommandName,
  argument: string,
): Promise<"end_turn" | "cancelled"> {
  try {
    return await dispatch(host, name, argument);
  } catch (err) {
    if (!isDomainError(err) || err.code === "persistence_failed") throw err;
    host.say(`/${name}: ${err.message}`);
    return "end_turn";
  }
}

async function dispatch(host: CommandHost, name: CommandName, argument: string): Promise<"end_turn" | "cancelled"> {
  if (name === "goal") {
    if (argument === "") {
      host.say("Say /goal followed by the goal, e.g. /goal make the tests pass.");
      return "end_turn";
    }
    return host.startGoal(argument);
  }
  const goalRunId = host.goalRunId();
  const product = await host.product();
  switch (name) {
    case "status":
      host.say(await statusText(host, goalRunId, product));
      return "end_turn";
    case "pause":
      if (goalRunId !== undefined) {
        const { status } = await host.goals.pause(goalRunId);
        host.say(`The goal run is ${status}. Say /resume to continue it.`);
      } else {
        if (!product) return nothing(host);
        await host.products.pause(product.productId);
        host.say(`Paused "${product.model.state.name}". Say /resume to continue it.`);
      }
      return "end_turn";
    case "resume":
      if (goalRunId !== undefined) {
        await host.goals.resume(goalRunId);
        return host.followGoal(goalRunId);
      }
      if (!product) return nothing(host);
      await host.products.resume(product.productId);
      return host.followProduct(product);
    case "cancel":
      if (goalRunId !== undefined) {
        await host.goals.stop(goalRunId, "cancelled with /cancel");
        host.say("The goal run is stopped; your next message starts new work.");
      } else {
        if (!product) return nothing(host);
        await host.products.cancel(product.productId);
        host.say(`Cancelled "${product.model.state.name}"; your next message starts a new product.`);
      }
      return "end_turn";
    case "checkpoint": {
      if (!product) return nothing(host);
      const { checkpointId, at } = await host.products.checkpoint(product.productId);
      host.say(`Checkpoint ${checkpointId} taken at ${at}. Say /rollback ${checkpointId} to come back to it.`);
      return "end_turn";
    }
    case "rollback": {
      if (!product) return nothing(host);
      const done = await host.products.rollback(product.productId, argument === "" ? undefined : argument);
      host.say(`Rolled back to checkpoint ${done.checkpointId}; the product is ${done.phase}.`);
      return "end_turn";
    }
    case "replay": {
      if (!product) return nothing(host);
      if (argument === "") {
        const ids = product.model.state.tasks.map((t) => t.taskId).join(", ");
        host.say(`Say /replay followed by a task id (${ids || "the product has no tasks yet"}).`);
        return "end_turn";
      }
      const { reset } = await host.products.replayTask(product.productId, argument);
      host.say(`Task ${argument} will run again; reset: ${reset.join(", ")}.`);
      return "end_turn";
    }
  }
}

function nothing(host: CommandHost): "end_turn" {
  host.say("Nothing has started in this session yet: send a goal first.");
  return "end_turn";
}

async function statusText(host: CommandHost, goalRunId: string | undefined, product: ProductOrchestrator | undefined) {
  const lines: string[] = [];
  if (goalRunId !== undefined) {
    const g = await host.goals.status(goalRunId);
    lines.push(
      `Goal run ${g.goalRunId}: ${g.status}${g.endReason ? ` (${g.endReason})` : ""}, phase ${g.phaseIndex + 1}, ` +
        `${g.acceptance.passed} of ${g.acceptance.total} criteria pass.`,
    );
  }
  if (product) {
    const st = product.model.state;
    const c = product.model.counts;
    const total = st.tasks.length;
    const used = st.usage.inputTokens + st.usage.outputTokens;
    lines.push(
      `Product "${st.name}" (${st.productId}): ${product.phase}; ${c.completed} of ${total} tasks completed, ` +
        `${c.running} running, ${c.failed} failed, ${c.pending + c.waiting} pending; ${used} tokens used.`,
    );
    const recovery = product.recovery();
    if (recovery) lines.push(`Recovery: ${recovery.cause} ${recovery.remediation}`);
  }
  return lines.length > 0 ? lines.join("\n") : "Nothing has started in this session yet: send a goal first.";
}
