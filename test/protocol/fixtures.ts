/**
 * Valid example messages shared by the protocol tests. Each is the smallest message PROTOCOL.md allows, plus the
 * optional fields where a test needs them. Never mutated by tests (they copy before changing).
 */
export const CWD = "/home/dev/project";

export const instance = { instanceId: "i1", agentId: "claude", role: "coder" };

export const task = {
  taskId: "t1",
  title: "Write the parser",
  description: "Parse the input file.",
  instanceId: "i1",
  dependsOn: [],
};

export const plan = {
  productId: "prd_1",
  version: 1,
  name: "Parser",
  summary: "Build a parser.",
  instances: [instance],
  tasks: [task],
};

export const taskState = { ...task, status: "completed", attempts: 1, output: "done" };

export const progress = { total: 1, completed: 1, running: 0, failed: 0, pending: 0 };
