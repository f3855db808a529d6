/**
 * Commands printed for a person (resume hints, refusals in CLI words, the dashboard's answer) never carry the
 * PostgreSQL password of the `--state` URL: they name the store without it (node-postgres then takes the password
 * from PGPASSWORD or ~/.pgpass, docs/POSTGRESQL.md). A new user found it in clear in four places. And the note of a
 * command whose server was killed says, on PostgreSQL, that a fleet's --recover server may drive the product already.
 */
import { expect, it } from "vitest";
import { commandFlags, resumeCommandLine, stoppedNote } from "../../src/commands/drive.js";
import { inCliWords, printableState, storeFlags } from "../../src/operator/cli-verbs.js";

const URL_WITH_PASSWORD = "postgres://acp:s3cr%40t@db.example:5433/acp?schema=team";

it("drops the password of a postgres:// state and keeps the rest; a path is unchanged", () => {
  expect(printableState(URL_WITH_PASSWORD)).toBe("postgres://acp@db.example:5433/acp?schema=team");
  expect(printableState("postgresql://db.example/acp")).toBe("postgresql://db.example/acp");
  expect(printableState("/var/lib/acp/state.db")).toBe("/var/lib/acp/state.db");
});

it("prints resume hints, refusals and recovery lines without the password", () => {
  const values = { state: URL_WITH_PASSWORD };
  expect(commandFlags(values)).toBe(" --state 'postgres://acp@db.example:5433/acp?schema=team'");
  expect(resumeCommandLine("prd_1", values)).toBe(
    "acp-orchestrator resume prd_1 --state 'postgres://acp@db.example:5433/acp?schema=team'",
  );
  const refusal = inCliWords("Call product.resume to continue.", "prd_1", storeFlags(URL_WITH_PASSWORD));
  expect(refusal).toBe(
    `Run "acp-orchestrator resume prd_1 --state 'postgres://acp@db.example:5433/acp?schema=team'" to continue.`,
  );
  for (const text of [commandFlags(values), resumeCommandLine("prd_1", values), refusal]) {
    expect(text).not.toContain("s3cr");
  }
});

it("says, when a killed server drove the product on PostgreSQL, that a --recover server may drive it already", () => {
  expect(stoppedNote("prd_1", { state: "/tmp/state.db" })).toBe(
    " while running prd_1 — resume with: acp-orchestrator resume prd_1 --state /tmp/state.db",
  );
  const note = stoppedNote("prd_1", { state: URL_WITH_PASSWORD });
  expect(note).toBe(
    " while running prd_1 — resume with: acp-orchestrator resume prd_1 --state 'postgres://acp@db.example:5433/acp?schema=team'" +
      " (unless a server started with --recover took it over already: acp-orchestrator status prd_1 --state" +
      " 'postgres://acp@db.example:5433/acp?schema=team' shows who drives it)",
  );
});
