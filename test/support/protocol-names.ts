/**
 * The method and notification names of PROTOCOL.md, hard-coded from the document (not from protocol/methods.ts), so
 * tests that check the server against the contract do not check the table against itself. One list, used by every
 * such test.
 */

/** PROTOCOL.md section 4: the ACP methods the server serves. */
export const ACP_METHODS = ["initialize", "session/new", "session/load", "session/list", "session/close", "session/prompt"];

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
  "product.dagMutated",
  "product.budgetUpdate",
  "product.budgetWarning",
  "product.budgetExceeded",
  "product.checkpoint",
  "product.persistenceError",
  "product.taskIntegrated",
  "product.integrated",
  "product.ownershipLost",
  "product.completed",
];
