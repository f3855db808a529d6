/**
 * The command dispatcher (src/cli.ts) of the built CLI as a user meets it (issue 15, "README and CLI"): `help` and
 * `version` as commands, each command's help, our own one-sentence messages for unknown commands and options, bad
 * environment variables named as environment variables, and option values that start with "-".
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "../../src/commands/index.js";
import { makeRepo } from "../support/git-repo.js";
import { CLI, REPO_ROOT, tempDir } from "../support/server-process.js";

function cli(args: string[], env: Record<string, string> = {}) {
  const run = spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    cwd: tempDir("acp-orch-cli-"),
    env: { ...process.env, ...env },
    input: "",
    timeout: 30_000,
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

const version = (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("the built executable", () => {
  // Regression (issue 35): tsc writes dist/src/cli.js with mode 644, so `npx acp-orchestrator` in the checkout (which
  // runs the `bin` file itself) failed with "Permission denied". The build makes it executable.
  it("runs as a program of its own: `#!/usr/bin/env node` and the execute bit", () => {
    expect(readFileSync(CLI, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node");
    expect(statSync(CLI).mode & 0o111).toBe(0o111);
    const run = spawnSync(CLI, ["version"], { encoding: "utf8", input: "", timeout: 30_000 });
    expect({ code: run.status, stdout: run.stdout, error: run.error?.message }).toEqual({
      code: 0,
      stdout: `${version}\n`,
      error: undefined,
    });
  });
});

describe("acp-orchestrator help and version", () => {
  it.each([["help"], ["--help"], ["-h"]])("%s lists every command and exits 0", (flag) => {
    const run = cli([flag]);
    expect(run.code).toBe(0);
    for (const name of ["serve", "demo", "record", "replay", "help", "version"]) {
      expect(run.stdout).toContain(`acp-orchestrator ${name === "serve" ? "[serve]" : name}`);
    }
    expect(run.stderr).toBe("");
  });

  it.each([["version"], ["--version"], ["-v"]])("%s prints the package version", (flag) => {
    expect(cli([flag])).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("help COMMAND and COMMAND --help print that command's options", () => {
    const viaHelp = cli(["help", "demo"]);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toMatch(/^Usage: acp-orchestrator demo /);
    expect(cli(["demo", "--help"]).stdout).toBe(viaHelp.stdout);
    expect(cli(["serve", "-h"]).stdout).toMatch(/^Usage: acp-orchestrator \[serve\]/);
  });
});

describe("every control verb's usage line lists every option it accepts", () => {
  // A new user's trial: `help retry` and `help confirm` named --state, --request-id and --json only. The usage line is
  // generated from the verb's option table (control.ts verbSynopsis); its Options section is written by hand.
  const verbs = ["pause", "cancel", "checkpoint", "retry", "rollback", "confirm", "answer", "message", "delete"];
  it.each(verbs)("%s", (name) => {
    const help = cli(["help", name]).stdout;
    const usage = help.split("\n")[0] ?? "";
    const options = [...help.split("\nOptions:\n")[1]!.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
    expect(options.length).toBeGreaterThanOrEqual(6);
    for (const option of options) expect(usage).toContain(`[${option}`);
    const inUsage = [...usage.matchAll(/\[(--[a-z-]+)/g)].map((m) => m[1]);
    expect(inUsage.sort()).toEqual([...options].sort());
  });
  it("confirm's --edit is in its usage line and its Options", () => {
    const help = cli(["help", "confirm"]).stdout;
    expect(help).toMatch(/^Usage: acp-orchestrator confirm ID \[--edit plan\.json\] /);
    expect(help).toMatch(/^ {2}--edit plan\.json +confirm this edited plan/m);
  });
});

describe("every command's usage names every option its parser accepts", () => {
  // A new user's trial (item 7): demo --keep, the --log-level of run, resume and ui, events --poll-ms and ui
  // --max-streams were accepted but missing from their usage lines. Each command's option table is the one its parser
  // uses (Command.options), so an option added to a parser and not to its usage line fails here.
  const withOptions = COMMANDS.filter((c) => c.options !== undefined);
  it("covers the commands that take options", () => {
    expect(withOptions.map((c) => c.name)).toEqual(expect.arrayContaining(["serve", "run", "resume", "demo", "ui"]));
  });
  it.each(withOptions.map((c) => [c.name, c] as const))("%s", (_name, command) => {
    const usage = command.help.split("\n\n")[0] ?? "";
    expect(usage).toMatch(/^Usage: acp-orchestrator /);
    // A usage line that says "[options]" (serve's) leaves them to its Options section, which must list each.
    const listed = usage.endsWith("[options]") ? (command.help.split("\nOptions:\n")[1] ?? "") : usage;
    for (const option of Object.keys(command.options ?? {})) {
      expect(command.synopsis).toMatch(new RegExp(`--${option}(?![a-z-])`));
      expect(listed).toMatch(new RegExp(`--${option}(?![a-z-])`));
    }
  });
});

describe("mistakes get one plain sentence and exit 2", () => {
  it("an unknown command", () => {
    const run = cli(["lsit"]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe('acp-orchestrator: There is no command "lsit". See "acp-orchestrator help".\n');
  });

  it("an unknown option, in our words (no parser text, balanced quotes)", () => {
    const run = cli(["serve", "--sate", "x.db"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('acp-orchestrator: "serve" has no option --sate. See "acp-orchestrator help serve".\n');
    expect(cli(["--sate", "x.db"]).stderr).toBe(run.stderr);
  });

  it("a flag given a value and an option without one", () => {
    expect(cli(["demo", "--keep=yes"]).stderr).toContain('The option --keep of "demo" takes no value.');
    expect(cli(["demo", "--goal"]).stderr).toContain('The option --goal of "demo" needs a value.');
  });

  it("an option whose value was left out, so the next option would be taken as it (run --goal --yes)", () => {
    // A new user's trial: `run --goal --yes` planned the goal "--yes".
    const run = cli(["run", "--goal", "--yes"]);
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr:
        'acp-orchestrator: The option --goal of "run" needs a value, not the option --yes (write --goal=--yes if ' +
        'that is the value). See "acp-orchestrator help run".\n',
    });
    expect(cli(["run", "--goal", "-y"]).stderr).toContain('--goal of "run" needs a value, not the option -y ');
    expect(cli(["status", "prd_x", "--state", "--json"]).stderr).toContain("not the option --json ");
    expect(cli(["demo", "--goal", "--keep=no"]).stderr).toContain("not the option --keep=no ");
  });

  it("a --state file in a folder that does not exist is refused, and the folder is not made", () => {
    // A new user's trial: `--state /nonexistent/x.db` created /nonexistent silently (a typo's folder).
    const dir = tempDir("acp-orch-cli-");
    const state = join(dir, "missing", "x.db");
    const run = cli(["run", "--state", state, "--yes", "--goal", "- Write a README"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `acp-orchestrator: The folder ${join(dir, "missing")} of the state file ${state} (from --state) does not exist; create it first`,
    );
    expect(existsSync(join(dir, "missing"))).toBe(false);
    expect(cli(["serve"], { ACP_ORCHESTRATOR_STATE: state }).stderr).toContain("(from $ACP_ORCHESTRATOR_STATE)");
    expect(existsSync(join(dir, "missing"))).toBe(false);
  });

  it("a plan left unconfirmed by run names the store in its confirm command, and that command confirms it", () => {
    // A new user's trial: the printed command had no --state, so it looked in the default store and found nothing.
    const state = join(tempDir("acp-orch-cli-"), "state.db");
    const repo = makeRepo();
    const run = cli(["run", "--cwd", repo, "--state", state, "--goal", "- Write a FAQ"]);
    expect(run.code).toBe(1);
    const hint = /the plan waits in the store: "acp-orchestrator (confirm [^"]+)"/.exec(run.stdout)?.[1] ?? "";
    expect(hint).toContain(` --state ${state}`);
    const confirm = cli(hint.split(" "));
    expect(confirm.stderr).not.toContain("was not found");
    expect(confirm.code).toBe(0);
  });

  it("a bad environment variable is named as the environment variable, a bad option as the option", () => {
    const fromEnv = cli(["serve"], { ACP_ORCHESTRATOR_LOG_LEVEL: "loud" });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('The log level "loud" from the environment variable ACP_ORCHESTRATOR_LOG_LEVEL');
    const fromFlag = cli(["serve", "--log-level", "loud"], { ACP_ORCHESTRATOR_LOG_LEVEL: "warn" });
    expect(fromFlag.stderr).toContain('The log level "loud" from --log-level is not one of trace, debug');
    const timeout = cli(["serve"], { ACP_ORCHESTRATOR_HOST_TIMEOUT_MS: "soon" });
    expect(timeout.stderr).toContain('"soon" from the environment variable ACP_ORCHESTRATOR_HOST_TIMEOUT_MS must be');
    const lease = cli(["serve"], { ACP_ORCHESTRATOR_LEASE_TTL_MS: "5" });
    expect(lease.stderr).toContain(
      '"5" from the environment variable ACP_ORCHESTRATOR_LEASE_TTL_MS must be an integer of at least 30',
    );
  });
});
