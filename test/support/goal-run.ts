/**
 * Goal-run helpers shared by the goal e2e tests: the goal run's stored events, and `x/goal.resume` after a crash.
 * Test support only.
 */
import Database from "better-sqlite3";
import { expect } from "vitest";
import type { ServerHandle } from "./server-process.js";

/** The goal run's stored events in the SQLite state file at `statePath` (opened read-only), oldest first. */
export function goalEvents(statePath: string, goalRunId: string): Record<string, unknown>[] {
  const db = new Database(statePath, { readonly: true });
  try {
    return (
      db.prepare("SELECT event FROM events WHERE stream = ? ORDER BY seq").all(`goal/${goalRunId}`) as {
        event: string;
      }[]
    ).map((r) => JSON.parse(r.event) as Record<string, unknown>);
  } finally {
    db.close();
  }
}

/**
 * `x/goal.resume` after a crash, asserting its answer. The killed process may still hold the lease (DESIGN.md
 * guarantee 6) until it expires; the resume is then refused with -32012 (recording nothing) and tried again, for up
 * to 45 s.
 */
export async function resumeGoalWhenLeaseFree(server: ServerHandle, goalRunId: string): Promise<void> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    try {
      expect(await server.request("x/goal.resume", { goalRunId })).toEqual({ goalRunId, status: "running" });
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== -32012 || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
