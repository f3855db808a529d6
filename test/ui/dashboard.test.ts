/**
 * `acp-orchestrator ui` in a real browser on a SQLite store driven live by another server process (issue 15, "Must
 * show"): the product list, a DAG whose node colours follow the run (checked on screenshots), a task's output, no
 * console errors. The scenario is in dashboard-scenario.ts; screenshots are kept in the test's temp folder.
 */
import { join } from "node:path";
import { describe, it } from "vitest";
import { tempDir } from "../support/server-process.js";
import { dashboardScenario } from "./dashboard-scenario.js";

describe("dashboard in headless Chromium", () => {
  it("shows the product list, a live DAG whose nodes change colour, a task's output, and no console errors (SQLite)", async () => {
    await dashboardScenario(join(tempDir("acp-orch-ui-state-"), "state.db"));
  }, 240_000);
});
