/**
 * The scripted sessions behind protocol/transcripts/ (recorded by record-corpus.ts through the recorder).
 *
 * One scenario per file: a method of PROTOCOL.md sections 4-5 with its happy path and every error code it can return
 * deterministically against a fresh server, the ACP session flows, the full product run's notification sequence, and
 * the transport-level errors. Scenarios wait for what they depend on, so the recorded order of `send` lines is one a
 * fresh server reproduces. Products run on the built-in agents (heuristic leader, built-in worker).
 */
import type { Json } from "../../src/transcripts/format.js";
import type { ScriptClient } from "./record-corpus.js";

type Msg = Record<string, unknown>;

export interface Scenario {
  /** File name without `.jsonl`. */
  name: string;
  title: string;
  description: string;
  /** Which notifications to keep (default: all). Responses and waited-for messages are always kept. */
  keep?: (message: Msg) => boolean;
  /** Marks recv lines `ordered` (their messages must arrive in the recorded order). */
  ordered?: (message: Msg) => boolean;
  /** Adjusts a normalised recv pattern (`raw` is the message as recorded). */
  loosen?: (pattern: Record<string, Json>, raw: Msg) => Record<string, Json>;
  /** `timeoutMs` for every recv line (default: the replayer's). */
  timeoutMs?: number;
  run(c: ScriptClient): Promise<void>;
}

const INIT = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "transcript-corpus", version: "1" } };
/** The heuristic leader reads "Then" as a dependency: two tasks, t2 after t1. */
const GOAL = "- Write the parser\n- Then write the tests for the parser";
const GOAL3 = "- Write the parser\n- Then write the tests\n- Then write the docs";
const none = () => false;

/** True for a `session/update` notification of this `sessionUpdate` kind. */
function isUpdate(m: Msg, kind: string): boolean {
  const update = (m.params as { update?: { sessionUpdate?: string } } | undefined)?.update;
  return m.method === "session/update" && update?.sessionUpdate === kind;
}

function result(m: Msg): Msg {
  if (!("result" in m)) throw new Error(`expected a result: ${JSON.stringify(m)}`);
  return m.result as Msg;
}

function errorCode(m: Msg, code: number): void {
  const e = m.error as { code?: number } | undefined;
  if (e?.code !== code) throw new Error(`expected error ${code}: ${JSON.stringify(m)}`);
}

async function init(c: ScriptClient, capabilities: Msg = {}): Promise<void> {
  await c.call("initialize", { ...INIT, clientCapabilities: capabilities });
}

async function planned(c: ScriptClient, goal = GOAL, extra: Msg = {}): Promise<{ productId: string; plan: Msg }> {
  const productId = result(await c.call("product.plan", { goal, cwd: c.workspace, ...extra })).productId as string;
  const ready = await c.product("product.planReady", productId);
  return { productId, plan: (ready.params as Msg).plan as Msg };
}

async function completed(c: ScriptClient, goal = GOAL): Promise<string> {
  const { productId } = await planned(c, goal);
  result(await c.call("product.confirm", { productId }));
  await c.product("product.completed", productId);
  return productId;
}

/** Confirm and pause in one write: the pause lands before the first task finishes (phase paused). */
async function paused(c: ScriptClient, goal = GOAL): Promise<string> {
  const { productId } = await planned(c, goal);
  const mark = c.mark();
  const [confirm, pause] = await c.callTogether(["product.confirm", { productId }], ["product.pause", { productId }]);
  result(confirm!);
  result(pause!);
  // What ran between the confirm and the pause is timing-dependent; only the two answers are kept.
  c.dropSince(mark);
  return productId;
}

/**
 * True for an ACP `plan` update whose entries do not all share one status. The session adapter coalesces plan updates
 * per event-loop turn, so how many of these a run sends, and what they show, depends on timing: the session
 * transcripts keep the first plan (all pending) and the last (all completed) and drop the ones in between.
 */
function isIntermediatePlan(m: Msg): boolean {
  const update = (m.params as Msg | undefined)?.update as Msg | undefined;
  if (m.method !== "session/update" || update?.sessionUpdate !== "plan") return false;
  const entries = update.entries as { status: string }[];
  return new Set(entries.map((e) => e.status)).size > 1;
}

export const scenarios: Scenario[] = [
  {
    name: "initialize",
    title: "initialize: -32600 before it, -32602 for bad params, version negotiation and capabilities",
    description:
      "PROTOCOL.md sections 3-4: every request but initialize is refused with -32600 until initialize succeeded " +
      "(a failed initialize does not count); an unsupported protocolVersion is answered with 1; the result " +
      "advertises the capabilities and every extension method and notification.",
    async run(c) {
      c.note("Before initialize: any other request is -32600 (invalid request).");
      errorCode(await c.call("product.list", {}), -32600);
      errorCode(await c.call("session/new", { cwd: c.workspace, mcpServers: [] }), -32600);
      c.note("initialize with a protocolVersion of the wrong type: -32602 with the issue's path.");
      errorCode(await c.call("initialize", { protocolVersion: "1", clientCapabilities: {} }), -32602);
      c.note("A failed initialize does not initialize: still -32600.");
      errorCode(await c.call("product.list", {}), -32600);
      c.note("An unsupported version (99) is answered with 1, never an error.");
      result(await c.call("initialize", { ...INIT, protocolVersion: 99 }));
      c.note("Now the server serves: product.list on a fresh server is empty.");
      result(await c.call("product.list", {}));
    },
  },
  {
    name: "transport-errors",
    title: "Transport: -32700 not JSON, -32600 not JSON-RPC or a batch, -32601 unknown method",
    description:
      "PROTOCOL.md sections 1 and 3: a line that is not JSON gets -32700 with id null, an object that is not a valid " +
      "JSON-RPC message or a batch gets -32600, an unknown method gets -32601 {method}, an unknown notification is " +
      "ignored, and the connection stays usable after each.",
    async run(c) {
      await init(c);
      c.note("Not JSON at all: -32700 with id null.");
      c.write("this is not json");
      await c.waitFor((m) => (m.error as Msg | undefined)?.code === -32700);
      c.note("Truncated JSON: -32700 with id null.");
      c.write('{"jsonrpc":"2.0","id":1,"method":');
      await c.waitFor((m) => (m.error as Msg | undefined)?.code === -32700);
      c.note("JSON that is not a JSON-RPC message: -32600 with id null.");
      c.write({ hello: "world" });
      await c.waitFor((m) => (m.error as Msg | undefined)?.code === -32600 && m.id === null);
      c.note('A request with "jsonrpc": "1.0": -32600 echoing its id.');
      c.write({ jsonrpc: "1.0", id: "v1", method: "product.list", params: {} });
      await c.waitFor((m) => m.id === "v1");
      c.note("A batch (JSON array) is refused with -32600.");
      c.write([{ jsonrpc: "2.0", id: "in-batch", method: "product.list", params: {} }]);
      await c.waitFor((m) => (m.error as Msg | undefined)?.code === -32600 && m.id === null);
      c.note("Unknown methods, bare and with the ACP underscore: -32601 with data.method as sent.");
      errorCode(await c.call("product.explode", {}), -32601);
      errorCode(await c.call("_x/unknown", {}), -32601);
      c.note("An unknown notification is ignored silently; the next request is answered normally.");
      c.notify("product.nothing", { productId: "prd_none" });
      result(await c.call("product.list", {}));
    },
  },
  {
    name: "extension-prefix",
    title: "Method names: the _-prefixed ACP spelling of requests and, on request, of notifications",
    description:
      "PROTOCOL.md section 2: every extension method is also served with a leading underscore, and a client that " +
      'sets clientCapabilities._meta["acp-orchestrator"].extensionPrefix to "_" gets every product notification ' +
      "with the underscore too.",
    keep: (m) => typeof m.method === "string" && m.method.startsWith("_product."),
    async run(c) {
      await init(c, { _meta: { "acp-orchestrator": { extensionPrefix: "_" } } });
      c.note("_product.plan is product.plan; its notifications come as _product.*.");
      const productId = result(await c.call("_product.plan", { goal: GOAL, cwd: c.workspace })).productId as string;
      await c.product("product.planReady", productId);
      result(await c.call("_product.status", { productId }));
      result(await c.call("_product.cancel", { productId }));
    },
  },
  {
    name: "product-run",
    title: "A full product run on the built-in agents: the notification sequence",
    description:
      "PROTOCOL.md section 5 with the heuristic leader and the built-in worker: product.plan answers first, then " +
      "planningDelta, leaderMessage and planReady; after product.confirm: teamRoster, dagTopology, and per task " +
      "taskStatus running, taskOutputDelta and agentActivity, taskStatus completed, checkpoint, budgetUpdate; then " +
      "product.completed. Product notifications are `ordered`: they must arrive in this order.",
    ordered: (m) => typeof m.method === "string" && m.method.startsWith("product."),
    async run(c) {
      await init(c);
      c.note("Two tasks, t2 depends on t1 (the heuristic leader reads 'Then' as a dependency).");
      const { productId } = await planned(c);
      result(await c.call("product.confirm", { productId }));
      await c.product("product.completed", productId);
      c.note("The settled state: completed, two checkpoints (one per completed task).");
      result(await c.call("product.status", { productId }));
      result(await c.call("product.checkpoints", { productId }));
    },
  },
  {
    name: "session-flow",
    title: "ACP session flow: initialize, session/new, session/prompt, permission confirm, updates, end_turn",
    description:
      "PROTOCOL.md section 4: the first prompt starts a product with the prompt as its goal; leader text streams as " +
      "agent_message_chunk, the plan as a plan update; session/request_permission offers confirm/revise; confirm " +
      "runs the plan in the same turn with one tool_call per task (in_progress, then completed with the worker's " +
      "text); a summary message comes before end_turn. Plan updates between the first (all pending) and the last " +
      "(all completed) are coalesced per event-loop turn, so their number depends on timing: they are left out.",
    keep: (m) => !isIntermediatePlan(m),
    async run(c) {
      await init(c);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      const prompt = c.start("session/prompt", { sessionId, prompt: [{ type: "text", text: GOAL }] });
      const permission = await c.waitFor((m) => m.method === "session/request_permission");
      c.note("The client answers the server's permission request (id captured from it): confirm.");
      c.respond(permission.id, { outcome: { outcome: "selected", optionId: "confirm" } });
      if (result(await prompt.response).stopReason !== "end_turn") throw new Error("expected end_turn");
      c.note("session/list shows the session with its title (the first prompt).");
      result(await c.call("session/list", {}));
    },
  },
  {
    name: "session-revise-load",
    title: "ACP session: revise, a revision message, a cancelled permission, the 'confirm' word, load, list, close",
    description:
      "PROTOCOL.md section 4: answering revise ends the turn with end_turn; the next prompt is a revision message to " +
      "the leader (new plan, new permission request); a cancelled outcome answers the prompt with cancelled; a prompt " +
      "whose text is 'confirm' starts execution; session/load replays the conversation and the latest plan before " +
      "answering {}; session/list and session/close.",
    keep: (m) => (m.method === "session/update" && !isIntermediatePlan(m)) || m.method === "session/request_permission",
    async run(c) {
      await init(c);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      const first = c.start("session/prompt", { sessionId, prompt: [{ type: "text", text: GOAL }] });
      const p1 = await c.waitFor((m) => m.method === "session/request_permission");
      c.note("revise: the turn ends; the next prompt is a message to the leader.");
      c.respond(p1.id, { outcome: { outcome: "selected", optionId: "revise" } });
      await first.response;
      const second = c.start("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "add a task to write the docs" }],
      });
      const p2 = await c.waitFor((m) => m.method === "session/request_permission");
      c.note("A cancelled permission outcome ends the turn with stopReason cancelled.");
      c.respond(p2.id, { outcome: { outcome: "cancelled" } });
      await second.response;
      c.note("A prompt that is just 'confirm' confirms the plan and runs it in this turn.");
      const third = await c.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "Confirm" }] });
      if (result(third).stopReason !== "end_turn") throw new Error("expected end_turn");
      result(await c.call("session/list", { cwd: c.workspace }));
      c.note(
        "session/load replays the messages, title, mode, config options, commands and the latest plan, then answers.",
      );
      result(await c.call("session/load", { sessionId, cwd: c.workspace, mcpServers: [] }));
      result(await c.call("session/close", { sessionId }));
    },
  },
  {
    name: "session-cancel",
    title: "ACP session: -32010 for a second prompt during a turn, session/cancel pauses, 'yes' resumes",
    description:
      "PROTOCOL.md section 4: a prompt while a turn runs is -32010; session/cancel ends the pending permission " +
      "request ($/cancel_request) and the prompt answers cancelled; during execution session/cancel pauses the " +
      "product; a prompt 'yes' on a paused product resumes it and the turn ends with end_turn when it completes.",
    keep: (m) => m.method === "$/cancel_request" || m.method === "product.completed",
    async run(c) {
      await init(c);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      const first = c.start("session/prompt", { sessionId, prompt: [{ type: "text", text: GOAL }] });
      await c.waitFor((m) => m.method === "session/request_permission");
      c.note("A second prompt while the first turn waits for permission: -32010 (phase prompting, allowed idle).");
      errorCode(await c.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] }), -32010);
      c.note("session/cancel: the permission request is cancelled and the prompt answers cancelled.");
      c.notify("session/cancel", { sessionId });
      await c.waitFor((m) => m.method === "$/cancel_request");
      if (result(await first.response).stopReason !== "cancelled") throw new Error("expected cancelled");
      c.note("'go' confirms and runs; a cancel once the first task started pauses the product.");
      const run = c.start("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] });
      const mark = c.mark();
      await c.waitFor((m) => {
        const u = (m.params as Msg | undefined)?.update as Msg | undefined;
        return m.method === "session/update" && u?.sessionUpdate === "tool_call";
      });
      c.notify("session/cancel", { sessionId });
      if (result(await run.response).stopReason !== "cancelled") throw new Error("expected cancelled");
      c.dropSince(mark);
      const list = result(await c.call("product.list", {})).products as Msg[];
      if (list[0]?.phase !== "paused") throw new Error(`expected paused: ${JSON.stringify(list)}`);
      c.note("'yes' on a paused product resumes it; the turn follows it to the end.");
      const resumed = await c.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "yes" }] });
      if (result(resumed).stopReason !== "end_turn") throw new Error("expected end_turn");
    },
  },
  {
    name: "session-errors",
    title: "ACP session methods: -32602 invalid params and -32002 unknown session",
    description:
      "PROTOCOL.md sections 3-4: session/new, session/load, session/list, session/close and session/prompt with " +
      "params that fail their schema (-32602 with issue paths), and an unknown session (-32002 {kind: session, id}).",
    async run(c) {
      await init(c);
      c.note(
        "-32602: a relative cwd, a missing sessionId, a wrong type, a prompt that is not an array, a blank prompt.",
      );
      errorCode(await c.call("session/new", { cwd: "relative/dir", mcpServers: [] }), -32602);
      errorCode(await c.call("session/load", { cwd: c.workspace, mcpServers: [] }), -32602);
      errorCode(await c.call("session/list", { cwd: "./here" }), -32602);
      errorCode(await c.call("session/close", { sessionId: 42 }), -32602);
      errorCode(await c.call("session/prompt", { sessionId: "ses_x", prompt: "hello" }), -32602);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      errorCode(await c.call("session/prompt", { sessionId, prompt: [{ type: "text", text: "   " }] }), -32602);
      c.note("-32002: an unknown session for prompt, load and close.");
      const unknown = "ses_does_not_exist";
      errorCode(await c.call("session/prompt", { sessionId: unknown, prompt: [{ type: "text", text: "hi" }] }), -32002);
      errorCode(await c.call("session/load", { sessionId: unknown, cwd: c.workspace, mcpServers: [] }), -32002);
      errorCode(await c.call("session/close", { sessionId: unknown }), -32002);
      c.note("A closed session is gone from this process but its record stays: session/list still lists it.");
      result(await c.call("session/close", { sessionId }));
      result(await c.call("session/list", {}));
    },
  },
  {
    name: "session-modes",
    title: "ACP session: modes, config options, commands, auto mode to end_turn, resume, delete, and their errors",
    description:
      "PROTOCOL.md section 4: session/new answers {sessionId, modes, configOptions} and then announces the commands " +
      "(available_commands_update); session/set_mode auto answers {} and announces current_mode_update; " +
      "session/set_config_option parallelism answers the complete list and announces config_option_update; in auto " +
      "mode the first prompt plans, confirms without session/request_permission (session_info_update names the " +
      "session) and runs to end_turn; session/resume replays nothing, announces the commands again before it " +
      "answers {modes, configOptions}; session/delete forgets the session (gone from session/list, unknown afterwards) and " +
      "succeeds for an unknown id. Errors: -32602 for an unknown mode, config id or value and for bad params, -32002 " +
      "for an unknown session. Plan updates between the first and the last are left out (coalesced per event-loop " +
      "turn, as in session-flow).",
    keep: (m) => !isIntermediatePlan(m),
    async run(c) {
      await init(c);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      await c.waitFor((m) => isUpdate(m, "available_commands_update"));
      c.note("set_mode auto: answered {}, announced as current_mode_update.");
      result(await c.call("session/set_mode", { sessionId, modeId: "auto" }));
      await c.waitFor((m) => isUpdate(m, "current_mode_update"));
      c.note("set_config_option parallelism 2: answers the complete list, announced as config_option_update.");
      result(await c.call("session/set_config_option", { sessionId, configId: "parallelism", value: "2" }));
      await c.waitFor((m) => isUpdate(m, "config_option_update"));
      c.note("In auto mode the plan is confirmed without a permission request and the turn runs to the end.");
      const run = await c.call("session/prompt", { sessionId, prompt: [{ type: "text", text: GOAL }] });
      if (result(run).stopReason !== "end_turn") throw new Error(`expected end_turn: ${JSON.stringify(run)}`);
      if (c.received.some((m) => m.method === "session/request_permission")) {
        throw new Error("auto mode asked for permission");
      }
      if (!c.received.some((m) => isUpdate(m, "session_info_update"))) throw new Error("no session_info_update");
      c.note("session/resume announces the commands, then answers {modes, configOptions} (auto, parallelism 2).");
      result(await c.call("session/resume", { sessionId, cwd: c.workspace }));
      await c.waitFor((m) => isUpdate(m, "available_commands_update")); // the first one was taken after session/new
      c.note("-32602: an unknown mode, an unknown config id, a value the option does not offer, bad params.");
      errorCode(await c.call("session/set_mode", { sessionId, modeId: "turbo" }), -32602);
      errorCode(await c.call("session/set_config_option", { sessionId, configId: "colour", value: "red" }), -32602);
      errorCode(await c.call("session/set_config_option", { sessionId, configId: "parallelism", value: "3" }), -32602);
      errorCode(await c.call("session/resume", { sessionId }), -32602);
      errorCode(await c.call("session/delete", { sessionId: 42 }), -32602);
      c.note("-32002: an unknown session for set_mode, set_config_option and resume.");
      const unknown = "ses_does_not_exist";
      errorCode(await c.call("session/set_mode", { sessionId: unknown, modeId: "auto" }), -32002);
      errorCode(
        await c.call("session/set_config_option", { sessionId: unknown, configId: "parallelism", value: "2" }),
        -32002,
      );
      errorCode(await c.call("session/resume", { sessionId: unknown, cwd: c.workspace }), -32002);
      c.note("session/delete forgets the session: it is gone from session/list and unknown afterwards.");
      result(await c.call("session/delete", { sessionId }));
      result(await c.call("session/list", {}));
      errorCode(await c.call("session/resume", { sessionId, cwd: c.workspace }), -32002);
      c.note("Deleting an unknown (or already deleted) session succeeds silently.");
      result(await c.call("session/delete", { sessionId }));
      result(await c.call("session/delete", { sessionId: unknown }));
    },
  },
  {
    name: "session-commands",
    title:
      "ACP session: every slash command (/status, /checkpoint, /replay, /pause, /resume, /rollback, /cancel, /goal) and goal mode to achieved",
    description:
      "PROTOCOL.md section 4: a plain client (session/* only) runs a product in auto mode, then every command " +
      "announced by available_commands_update as a prompt; each command's turn answers end_turn (a command the " +
      "product's phase does not allow answers with the reason as a message, never an error). /goal starts a goal " +
      "run whatever the mode and follows it to its end; then session/set_mode goal makes the next prompt a goal run " +
      "(current_mode_update), followed to achieved with the built-in agents. The commands' messages name ids, " +
      "timestamps and timing-dependent progress, and a goal run's updates depend on timing: only the answers, the " +
      "awaited notifications and the final messages that name the goal run's outcome are kept.",
    keep: none,
    async run(c) {
      await init(c);
      const sessionId = result(await c.call("session/new", { cwd: c.workspace, mcpServers: [] })).sessionId as string;
      await c.waitFor((m) => isUpdate(m, "available_commands_update"));
      result(await c.call("session/set_mode", { sessionId, modeId: "auto" }));
      await c.waitFor((m) => isUpdate(m, "current_mode_update"));
      c.note("Auto mode: the goal's product runs to the end in one turn.");
      const ask = (text: string) => c.call("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
      const endTurn = async (text: string): Promise<void> => {
        const answer = result(await ask(text));
        if (answer.stopReason !== "end_turn") throw new Error(`${text}: expected end_turn: ${JSON.stringify(answer)}`);
      };
      await endTurn(GOAL);
      for (const command of [
        "/status",
        "/checkpoint",
        "/replay t2",
        "/pause",
        "/resume",
        "/rollback",
        "/cancel",
        "/status",
      ]) {
        c.note(`${command}: its answer is a message, then end_turn.`);
        await endTurn(command);
      }
      c.note("/goal starts a goal run whatever the mode, and the turn follows it to its end.");
      await endTurn("/goal - Write the notes\n- Then write the summary");
      c.note("Goal mode: the next prompt is a goal run too, followed to achieved.");
      result(await c.call("session/set_mode", { sessionId, modeId: "goal" }));
      await c.waitFor((m) => isUpdate(m, "current_mode_update") && JSON.stringify(m).includes('"goal"'));
      await endTurn("- Write the parser\n- Then write the docs");
      const said = c.received
        .filter((m) => isUpdate(m, "agent_message_chunk"))
        .map((m) => JSON.stringify(m))
        .join("");
      if (!said.includes("Goal run achieved")) throw new Error("the goal-mode run did not reach achieved");
      c.note("/status names the goal run (achieved) and its last product.");
      await endTurn("/status");
    },
  },
  {
    name: "product.plan",
    title: "product.plan: happy paths (name, projectId, allowedAgents [], budget) and -32602",
    description:
      "PROTOCOL.md section 5: product.plan answers {productId, phase: planning} before any notification about the " +
      "product; allowedAgents [] means the leader alone; -32602 for a relative cwd, a blank goal, an unknown key and " +
      "an unknown budget key.",
    keep: none,
    async run(c) {
      await init(c);
      const a = await planned(c, GOAL, { name: "Parser", projectId: "prj_corpus", budget: { maxTotalTokens: 100000 } });
      c.note("allowedAgents [] = the leader alone: every task goes to the leader instance.");
      await planned(c, "Write the release notes", { allowedAgents: [] });
      result(await c.call("product.status", { productId: a.productId }));
      c.note("-32602: relative cwd, blank goal, an unknown key, an unknown budget key.");
      errorCode(await c.call("product.plan", { goal: "Write docs", cwd: "docs" }), -32602);
      errorCode(await c.call("product.plan", { goal: "   ", cwd: c.workspace }), -32602);
      errorCode(await c.call("product.plan", { goal: "Write docs", cwd: c.workspace, priority: "high" }), -32602);
      errorCode(
        await c.call("product.plan", { goal: "Write docs", cwd: c.workspace, budget: { maxTokens: 5 } }),
        -32602,
      );
      c.note("Nothing was created by the refused calls: only the two products are listed.");
      result(await c.call("product.list", {}));
    },
  },
  {
    name: "product.message",
    title:
      "product.message: revision during planning, a message while paused (leader mutations), -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: during awaiting_confirmation a message revises the plan ({response, plan} and a new " +
      "planReady); while paused the leader answers with mutations (dagMutated by leader); -32602 for a missing " +
      "content or an askId that matches no question; -32002 unknown product; -32010 on a cancelled product.",
    keep: (m) => m.method === "product.dagMutated",
    async run(c) {
      await init(c);
      const { productId } = await planned(c);
      c.note("A revision: the heuristic leader adds the task and proposes plan version 2.");
      result(await c.call("product.message", { productId, content: "add a task to write the docs" }));
      await c.product("product.planReady", productId, (p) => (p.plan as Msg).version === 2);
      c.note("-32602: no content; an askId while no question is pending.");
      errorCode(await c.call("product.message", { productId }), -32602);
      errorCode(await c.call("product.message", { productId, content: "yes", askId: "ask_none" }), -32602);
      errorCode(await c.call("product.message", { productId: "prd_does_not_exist", content: "hi" }), -32002);
      c.note("While paused, a message to the leader can mutate the DAG (dagMutated by: leader).");
      const pausedId = await paused(c);
      result(await c.call("product.message", { productId: pausedId, content: "add a task to write the changelog" }));
      await c.product("product.dagMutated", pausedId);
      c.note("-32010 on a cancelled product.");
      result(await c.call("product.cancel", { productId }));
      errorCode(await c.call("product.message", { productId, content: "more" }), -32010);
    },
  },
  {
    name: "product.confirm",
    title: "product.confirm: the leader's plan, an edited plan, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: confirm starts execution ({productId, ok: true, phase: executing}); an edited plan " +
      "(tasks) replaces the leader's; -32602 for an edited plan with a cycle or an instance listed twice; -32002 " +
      "unknown product; -32010 for a second confirm (executing) and after completion.",
    keep: (m) => m.method === "product.completed" || m.method === "product.dagTopology",
    async run(c) {
      await init(c);
      const { productId, plan } = await planned(c);
      const instances = plan.instances as Msg[];
      const instanceId = instances[0]!.instanceId;
      c.note("-32602: an edited plan whose tasks form a cycle; an instance listed twice.");
      errorCode(
        await c.call("product.confirm", {
          productId,
          tasks: [
            { taskId: "a", title: "A", description: "First", instanceId, dependsOn: ["b"] },
            { taskId: "b", title: "B", description: "Second", instanceId, dependsOn: ["a"] },
          ],
        }),
        -32602,
      );
      errorCode(await c.call("product.confirm", { productId, instances: [instances[0], instances[0]] }), -32602);
      errorCode(await c.call("product.confirm", { productId: "prd_does_not_exist" }), -32002);
      c.note("An edited plan (one task) confirms; a second confirm in the same write finds it executing: -32010.");
      const [ok, again] = await c.callTogether(
        [
          "product.confirm",
          {
            productId,
            tasks: [{ taskId: "only", title: "Only task", description: "Write a note", instanceId, dependsOn: [] }],
          },
        ],
        ["product.confirm", { productId }],
      );
      result(ok!);
      errorCode(again!, -32010);
      await c.product("product.dagTopology", productId);
      await c.product("product.completed", productId);
      c.note("After completion: -32010 (phase completed).");
      errorCode(await c.call("product.confirm", { productId }), -32010);
    },
  },
  {
    name: "product.status",
    title: "product.status: awaiting confirmation, both spellings, -32602, -32002",
    description:
      "PROTOCOL.md section 5: the status of a product awaiting confirmation (plan, no tasks yet, zero budget use, " +
      "no checkpoints), also under the _product.status spelling; -32602 for an unknown key; -32002 unknown product. " +
      "The status of a completed product is in product-run.jsonl.",
    keep: none,
    async run(c) {
      await init(c);
      const { productId } = await planned(c);
      result(await c.call("product.status", { productId }));
      result(await c.call("_product.status", { productId }));
      errorCode(await c.call("product.status", { productID: productId }), -32602);
      errorCode(await c.call("product.status", { productId: "prd_does_not_exist" }), -32002);
    },
  },
  {
    name: "product.list",
    title: "product.list: empty, all, by phase, by project, -32602",
    description:
      "PROTOCOL.md section 5: product.list on a fresh server is empty; it lists products with their phase and " +
      "progress, filters by phase and projectId; -32602 for an unknown phase and for params that are not an object.",
    keep: none,
    async run(c) {
      await init(c);
      result(await c.call("product.list", {}));
      const a = await planned(c, GOAL, { projectId: "prj_list_a" });
      await planned(c, GOAL, { projectId: "prj_list_b" });
      result(await c.call("product.cancel", { productId: a.productId }));
      result(await c.call("product.list", {}));
      result(await c.call("product.list", { phase: "cancelled" }));
      result(await c.call("product.list", { projectId: "prj_list_b" }));
      result(await c.call("product.list", { projectId: "prj_list_b", phase: "cancelled" }));
      errorCode(await c.call("product.list", { phase: "running" }), -32602);
      errorCode(await c.call("product.list", [1, 2]), -32602);
    },
  },
  {
    name: "product.pause",
    title: "product.pause: pause while executing, idempotent on paused, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: a pause sent with the confirm lands while executing ({phase: paused}); pausing again " +
      "is idempotent; status reports the recovery; -32602 missing productId; -32002; -32010 while awaiting " +
      "confirmation.",
    keep: none,
    async run(c) {
      await init(c);
      const productId = await paused(c);
      result(await c.call("product.pause", { productId }));
      result(await c.call("product.status", { productId }));
      const awaiting = await planned(c);
      errorCode(await c.call("product.pause", { productId: awaiting.productId }), -32010);
      errorCode(await c.call("product.pause", {}), -32602);
      errorCode(await c.call("product.pause", { productId: "prd_does_not_exist" }), -32002);
    },
  },
  {
    name: "product.resume",
    title: "product.resume: paused → executing → completed, additionalBudget, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: resume of a paused product answers {phase: executing}, announces the team and the DAG " +
      "again and the run completes; -32602 for a non-integer token budget; -32002; -32010 on a completed product.",
    keep: (m) => m.method === "product.teamRoster" || m.method === "product.dagTopology",
    async run(c) {
      await init(c);
      const productId = await paused(c);
      const mark = c.mark();
      result(await c.call("product.resume", { productId, additionalBudget: { maxTotalTokens: 100000 } }));
      await c.product("product.teamRoster", productId);
      await c.product("product.completed", productId);
      c.dropSince(mark, (m) => m.method !== "product.teamRoster" && m.method !== "product.dagTopology");
      result(await c.call("product.status", { productId }));
      errorCode(await c.call("product.resume", { productId }), -32010);
      errorCode(await c.call("product.resume", { productId, additionalBudget: { maxTotalTokens: 1.5 } }), -32602);
      errorCode(await c.call("product.resume", { productId: "prd_does_not_exist" }), -32002);
    },
  },
  {
    name: "product.cancel",
    title: "product.cancel: awaiting confirmation → cancelled, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: cancel is final ({phase: cancelled}); cancelling again, pausing or confirming a " +
      "cancelled product is -32010; -32602 for an empty id; -32002 unknown product.",
    keep: none,
    async run(c) {
      await init(c);
      const { productId } = await planned(c);
      result(await c.call("product.cancel", { productId }));
      errorCode(await c.call("product.cancel", { productId }), -32010);
      errorCode(await c.call("product.pause", { productId }), -32010);
      errorCode(await c.call("product.confirm", { productId }), -32010);
      result(await c.call("product.status", { productId }));
      errorCode(await c.call("product.cancel", { productId: "" }), -32602);
      errorCode(await c.call("product.cancel", { productId: "prd_does_not_exist" }), -32002);
    },
  },
  {
    name: "product.checkpoints",
    title: "product.checkpoint and product.checkpoints: manual checkpoint, list, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: checkpoints of a product awaiting confirmation (none); a manual checkpoint of a paused " +
      "product ({checkpointId, at} and a product.checkpoint notification) then listed oldest first; -32010 for a " +
      "checkpoint while awaiting confirmation; -32602 and -32002 for both methods.",
    keep: none,
    async run(c) {
      await init(c);
      const awaiting = await planned(c);
      result(await c.call("product.checkpoints", { productId: awaiting.productId }));
      errorCode(await c.call("product.checkpoint", { productId: awaiting.productId }), -32010);
      const productId = await paused(c);
      const taken = result(await c.call("product.checkpoint", { productId }));
      await c.product("product.checkpoint", productId, (p) => p.checkpointId === taken.checkpointId);
      result(await c.call("product.checkpoints", { productId }));
      errorCode(await c.call("product.checkpoint", { productId: 7 }), -32602);
      errorCode(await c.call("product.checkpoints", { productId, verbose: true }), -32602);
      errorCode(await c.call("product.checkpoint", { productId: "prd_does_not_exist" }), -32002);
      errorCode(await c.call("product.checkpoints", { productId: "prd_does_not_exist" }), -32002);
    },
  },
  {
    name: "product.rollback",
    title: "product.rollback: back to the first checkpoint, the run continues; -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: rollback of a completed product to its first checkpoint answers {checkpointId, phase: " +
      "executing}, announces the DAG and runs the rest again to completion; an unknown checkpoint or product is " +
      "-32002; -32010 while awaiting confirmation; -32602 for a checkpointId that is not a string.",
    keep: (m) => m.method === "product.dagTopology",
    async run(c) {
      await init(c);
      const productId = await completed(c);
      const list = result(await c.call("product.checkpoints", { productId })).checkpoints as Msg[];
      const mark = c.mark();
      result(await c.call("product.rollback", { productId, checkpointId: list[0]!.checkpointId }));
      await c.product("product.completed", productId);
      c.dropSince(mark, (m) => m.method !== "product.dagTopology");
      result(await c.call("product.status", { productId }));
      errorCode(await c.call("product.rollback", { productId, checkpointId: "ckp_missing" }), -32002);
      errorCode(await c.call("product.rollback", { productId: "prd_does_not_exist" }), -32002);
      errorCode(await c.call("product.rollback", { productId, checkpointId: 3 }), -32602);
      const awaiting = await planned(c);
      errorCode(await c.call("product.rollback", { productId: awaiting.productId }), -32010);
    },
  },
  {
    name: "product.replayTask",
    title:
      "product.replayTask: replay t1 and its dependents; -32602, -32002 (product, task), -32010 (phase, task status)",
    description:
      "PROTOCOL.md section 5: replaying t1 of a completed product resets t1 and t2 ({reset: [t1, t2]}) and runs " +
      "them again to completion; -32002 for an unknown task or product; -32010 while awaiting confirmation and for " +
      "a task that is still pending; -32602 for a missing taskId.",
    keep: none,
    async run(c) {
      await init(c);
      const productId = await completed(c);
      result(await c.call("product.replayTask", { productId, taskId: "t1" }));
      await c.product("product.completed", productId);
      result(await c.call("product.status", { productId }));
      errorCode(await c.call("product.replayTask", { productId, taskId: "t-missing" }), -32002);
      errorCode(await c.call("product.replayTask", { productId: "prd_does_not_exist", taskId: "t1" }), -32002);
      errorCode(await c.call("product.replayTask", { productId }), -32602);
      const pausedId = await paused(c);
      c.note("A task that never ran (pending) cannot be replayed: -32010 with the task's status.");
      errorCode(await c.call("product.replayTask", { productId: pausedId, taskId: "t2" }), -32010);
      const awaiting = await planned(c);
      errorCode(await c.call("product.replayTask", { productId: awaiting.productId, taskId: "t1" }), -32010);
    },
  },
  {
    name: "product.mutate",
    title: "product.mutate: before confirmation and while paused; -32014, -32602, -32002, -32010",
    description:
      "PROTOCOL.md section 5: a mutation batch applies all or nothing ({applied, version}) and is announced " +
      "(dagMutated by user; planReady before confirmation, dagTopology after); a batch that closes a cycle or names " +
      "an unknown task is -32014 {index, reason}; -32602 for an unknown op; -32002; -32010 on a cancelled product.",
    keep: (m) => m.method === "product.dagMutated",
    async run(c) {
      await init(c);
      const { productId } = await planned(c);
      result(
        await c.call("product.mutate", {
          productId,
          mutations: [{ op: "updateTask", taskId: "t2", patch: { title: "Write the parser tests" } }],
        }),
      );
      await c.product("product.planReady", productId, (p) => (p.plan as Msg).version === 2);
      c.note("-32014: the second mutation closes a cycle, so none of the batch applies (index 1).");
      errorCode(
        await c.call("product.mutate", {
          productId,
          mutations: [
            { op: "updateTask", taskId: "t1", patch: { title: "Renamed by a batch that fails" } },
            { op: "addDependency", taskId: "t1", dependsOn: "t2" },
          ],
        }),
        -32014,
      );
      errorCode(
        await c.call("product.mutate", { productId, mutations: [{ op: "removeTask", taskId: "t-unknown" }] }),
        -32014,
      );
      errorCode(await c.call("product.mutate", { productId, mutations: [{ op: "explode", taskId: "t1" }] }), -32602);
      errorCode(
        await c.call("product.mutate", {
          productId: "prd_does_not_exist",
          mutations: [{ op: "removeTask", taskId: "t1" }],
        }),
        -32002,
      );
      c.note("While paused: an added task is announced with dagMutated and the whole DAG.");
      const pausedId = await paused(c);
      result(
        await c.call("product.mutate", {
          productId: pausedId,
          mutations: [
            {
              op: "addTask",
              task: {
                taskId: "t3",
                title: "Write the docs",
                description: "Document the parser",
                instanceId: "i1",
                dependsOn: ["t2"],
              },
            },
          ],
        }),
      );
      await c.product("product.dagTopology", pausedId);
      result(await c.call("product.cancel", { productId }));
      errorCode(await c.call("product.mutate", { productId, mutations: [{ op: "removeTask", taskId: "t1" }] }), -32010);
    },
  },
  {
    name: "product.delete",
    title: "product.delete: deleted, then not found; unknown → deleted false; -32602",
    description:
      "PROTOCOL.md section 5: delete of a product awaiting confirmation answers {deleted: true} and the product is " +
      "gone (-32002, not listed); deleting again or an unknown product answers {deleted: false}; -32602 for a " +
      "control character in the id.",
    keep: none,
    async run(c) {
      await init(c);
      const { productId } = await planned(c);
      result(await c.call("product.delete", { productId }));
      errorCode(await c.call("product.status", { productId }), -32002);
      result(await c.call("product.delete", { productId }));
      result(await c.call("product.delete", { productId: "prd_never_existed" }));
      result(await c.call("product.list", {}));
      errorCode(await c.call("product.delete", { productId: "prd_\u0001" }), -32602);
    },
  },
  {
    name: "budget",
    title: "Budgets: product.budgetWarning at 80 %, product.budgetExceeded pauses, resume with additionalBudget",
    description:
      "PROTOCOL.md section 5 and DESIGN.md guarantee 9: a token budget reached 80 % after the first task " +
      "(budgetWarning, once), exceeded after the second (budgetExceeded, the product is paused, not failed, with a " +
      "recovery); product.resume with additionalBudget runs the rest to completion. Token counts are estimates from " +
      "text length (4 characters per token), so the numbers in `reason` match any digits.",
    keep: (m) => typeof m.method === "string" && /^product\.(budget|completed)/.test(m.method),
    loosen: (pattern, raw) => {
      if (raw.method === "product.budgetUpdate" && (raw.params as Msg).maxTotalTokens !== 100) {
        // After resume the limit is the spent tokens plus additionalBudget: as volatile as the token estimate.
        const copy = JSON.parse(JSON.stringify(pattern)) as { params: Record<string, Json> };
        copy.params.maxTotalTokens = { $type: "integer" };
        return copy as unknown as Record<string, Json>;
      }
      if (raw.method !== "product.budgetWarning" && raw.method !== "product.budgetExceeded") return pattern;
      const reason = String((raw.params as Msg).reason);
      const source = `^${reason.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/\d+/g, "\\d+")}$`;
      const copy = JSON.parse(JSON.stringify(pattern)) as { params: Record<string, Json> };
      copy.params.reason = { $regex: source };
      return copy as unknown as Record<string, Json>;
    },
    async run(c) {
      await init(c);
      c.note("maxTotalTokens 100: t1 uses about 86 tokens (80 % warning), t2 about 150 more (exceeded after t2).");
      const { productId } = await planned(c, GOAL3, { budget: { maxTotalTokens: 100 } });
      result(await c.call("product.confirm", { productId }));
      await c.product("product.budgetWarning", productId);
      await c.product("product.budgetExceeded", productId);
      const st = result(await c.call("product.status", { productId }));
      if (st.phase !== "paused") throw new Error(`expected paused: ${JSON.stringify(st)}`);
      result(await c.call("product.resume", { productId, additionalBudget: { maxTotalTokens: 100000 } }));
      await c.product("product.completed", productId);
    },
  },
];
