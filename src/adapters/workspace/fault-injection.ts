/**
 * Crash injection for the integration steps (issue 12, "Must show": kill -9 of the server at each integration step,
 * then resume). When the environment variable `ACP_ORCHESTRATOR_WORKSPACE_FAULT` is `<step>:<marker file>`, the
 * wrapped `WorkspacePort` SIGKILLs its own process once, at that step, and creates the marker file so a restarted
 * server (which sees the same file) does not crash again. Steps:
 * - `capture`: while committing a finished attempt (before anything about its result is recorded);
 * - `beforeMerge`: after the merge intent was recorded, before the integration branch moves;
 * - `afterMerge`: after the integration branch moved, before the merge is recorded.
 * Test-only by intent: without the variable `withFaults` returns the port unchanged.
 */
import { existsSync, writeFileSync } from "node:fs";
import type { WorkspacePort } from "../../core/ports.js";

export const WORKSPACE_FAULT_ENV = "ACP_ORCHESTRATOR_WORKSPACE_FAULT";

type Step = "capture" | "beforeMerge" | "afterMerge";

/** Wraps `port` with the crash point named by `spec` (`<step>:<marker file>`); `port` itself when `spec` is empty. */
export function withFaults(port: WorkspacePort, spec: string | undefined): WorkspacePort {
  const m = /^(capture|beforeMerge|afterMerge):(.+)$/.exec(spec ?? "");
  if (!m) return port;
  const step = m[1] as Step;
  const marker = m[2] as string;
  const crash = (at: Step): void => {
    if (at !== step || existsSync(marker)) return;
    writeFileSync(marker, `${at}\n`);
    process.kill(process.pid, "SIGKILL");
  };
  const isIntegrationMove = (ref: string, expected: string | null) =>
    ref.startsWith("refs/heads/acp/") && expected !== null;
  const attemptCwd = port.attemptCwd?.bind(port);
  return {
    inspect: (cwd) => port.inspect(cwd),
    attemptPath: (cwd, productId, taskId, attempt) => port.attemptPath(cwd, productId, taskId, attempt),
    ...(attemptCwd ? { attemptCwd } : {}),
    readRef: (cwd, ref) => port.readRef(cwd, ref),
    async moveRef(cwd, ref, to, expected) {
      if (isIntegrationMove(ref, expected)) crash("beforeMerge");
      const moved = await port.moveRef(cwd, ref, to, expected);
      if (isIntegrationMove(ref, expected)) crash("afterMerge");
      return moved;
    },
    deleteRefs: (cwd, refs, prefix) => port.deleteRefs(cwd, refs, prefix),
    prepare: (cwd, path, base) => port.prepare(cwd, path, base),
    async capture(path, message, base) {
      crash("capture");
      return port.capture(path, message, base);
    },
    merge: (cwd, head, commit, message) => port.merge(cwd, head, commit, message),
    release: (cwd, path, options) => port.release(cwd, path, options),
    leftovers: (cwd, productId) => port.leftovers(cwd, productId),
    removeProductFolder: (cwd, productId) => port.removeProductFolder(cwd, productId),
    integrateInto: (cwd, target, head, message) => port.integrateInto(cwd, target, head, message),
  };
}
