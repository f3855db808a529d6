/**
 * `acp-orchestrator ui` on a PostgreSQL store driven live by another server process: the same browser scenario as
 * dashboard.test.ts (dashboard-scenario.ts). Skipped loudly without ACP_ORCHESTRATOR_TEST_PG (`npm run
 * test:postgres` and `.ci/run` start a private cluster).
 */
import { afterAll, it } from "vitest";
import { describePostgres, dropSchema, freshSchema, urlWithSchema } from "../support/postgres.js";
import { dashboardScenario } from "./dashboard-scenario.js";

describePostgres("dashboard in headless Chromium on PostgreSQL", () => {
  const schema = freshSchema();
  afterAll(() => dropSchema(schema));
  it("shows the product list, a live DAG whose nodes change colour, a task's output, and no console errors (PostgreSQL)", async () => {
    await dashboardScenario(urlWithSchema(schema));
  }, 240_000);
});
