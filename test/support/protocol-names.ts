/**
 * The method and notification names of PROTOCOL.md, hard-coded from the document (not from protocol/methods.ts), so
 * tests that check the server against the contract do not check the table against itself. One list, used by every
 * such test.
 */

/** PROTOCOL.md section 4: the ACP methods the server serves. */
export const ACP_METHODS = [
  "initialize",
  "session/new",
  "session/load",
  "session/resume",
  "session/delete",
  "session/set_mode",
  "session/set_config_option",
  "session/list",
  "session/close",
  "session/prompt",
];

/** PROTOCOL.md section 4: the session modes, config options and commands. */
export const ACP_MODES = ["confirm", "auto", "goal"];
export const ACP_CONFIG_OPTIONS = ["leader", "parallelism", "isolation"];
export const ACP_COMMANDS = ["status", "pause", "resume", "cancel", "checkpoint", "rollback", "replay", "goal"];

/** ACP-V1.md section 3: the `session/update` kinds PROTOCOL.md section 4 sends. */
export const ACP_SESSION_UPDATES = [
  "user_message_chunk",
  "agent_message_chunk",
  "tool_call",
  "tool_call_update",
  "plan",
  "available_commands_update",
  "current_mode_update",
  "config_option_update",
  "session_info_update",
  "usage_update",
];

/** PROTOCOL.md section 5, method table, in table order. */
export const PRODUCT_METHODS = [
  "product.plan",
  "product.message",
  "product.confirm",
  "product.status",
  "product.list",
  "product.pause",
  "product.resume",
  "product.cancel",
  "product.checkpoint",
  "product.checkpoints",
  "product.rollback",
  "product.replayTask",
  "product.mutate",
  "product.delete",
];

/** PROTOCOL.md section 5, notification table, in table order. */
export const PRODUCT_NOTIFICATIONS = [
  "product.planningDelta",
  "product.leaderMessage",
  "product.leaderAsk",
  "product.planReady",
  "product.planFailed",
  "product.teamRoster",
  "product.dagTopology",
  "product.taskStatus",
  "product.taskOutputDelta",
  "product.agentActivity",
  "product.taskOverloaded",
  "product.dagMutated",
  "product.budgetUpdate",
  "product.budgetWarning",
  "product.budgetExceeded",
  "product.checkpoint",
  "product.persistenceError",
  "product.taskIntegrated",
  "product.taskVerified",
  "product.integrated",
  "product.ownershipLost",
  "product.completed",
];
