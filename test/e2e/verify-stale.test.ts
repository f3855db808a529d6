/**
 * A `verify` command killed with SIGKILL leaves no verify worktree for good (issue 30 follow-up; docs/VERIFY.md,
 * Surface): the real CLI (`acp-orchestrator verify ID`) runs a product's check in a verify worktree of its own; one is
 * SIGKILLed while its check runs, which leaves its folder and git's registration of its worktree behind. The next
 * `verify` removes both — and keeps the verify worktree of another `verify` that is alive and still checking.
 *
 * The check holds (waits for a file to go) only when it takes a "hold" token the test laid down, so each run is told
 * apart: A holds and is killed, B holds and stays alive, C runs straight through.
 *
 * A server sweeps too, when a product of the repository starts executing, checks or none: a dead process's verify
 * worktree planted in the repository is gone once a product without `verify` ran there (it used to stay until some
 * product's first check).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { git, makeRepo, worktreePaths } from "../support/git-repo.js";
import { CLI, startServer, tempDir } from "../support/server-process.js";
import { scriptedConfig, write } from "../support/verify-project.js";
import { ProcessLiveness } from "../../src/adapters/system/process-liveness.js";

/** Polls `probe` (20 ms apart) until it returns a value. */
async function until<T>(what: string, probe: () => T | undefined, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Runs the product "Notes" (one task on one scripted worker that writes notes.txt) on `repo` to completion in a
 * server of its own started in `base`, with `plan` added to `product.plan`'s params; the server is closed after.
 * Resolves the product's id and the server's state path.
 */
async function completeNotes(
  base: string,
  repo: string,
  plan: Record<string, unknown> = {},
): Promise<{ productId: string; state: string }> {
  const { config } = scriptedConfig(base, { worker: { default: write("notes.txt", "notes\n") } });
  const server = await startServer({ cwd: base, args: ["--config", config] });
  try {
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "Notes",
      cwd: repo,
      ...plan,
    });
    await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
    const done = server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 90_000);
    await server.request("product.confirm", {
      productId,
      instances: [{ instanceId: "w1", agentId: "scripted", role: "worker" }],
      tasks: [{ taskId: "notes", title: "Notes", description: "Write notes.", instanceId: "w1", dependsOn: [] }],
    });
    expect((await done).params.phase).toBe("completed");
    return { productId, state: server.statePath };
  } finally {
    await server.close();
  }
}

describe("verify: a killed verify command's worktree", () => {
  it("is removed by the next verify, and a live one's is kept", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const base = tempDir("acp-orch-verify-stale-");
    const verifyRoot = join(repo, ".git", "acp-orchestrator", "verify");
    // Takes the token `hold` when there is one (mv is atomic), notes where it runs, and waits until released.
    const check = join(base, "check.sh");
    writeFileSync(
      check,
      [
        "#!/bin/sh",
        `if mv '${base}/hold' '${base}/held-'$$ 2>/dev/null; then`,
        `  printf '%s\\n' "$PWD" > '${base}/started-'$$`,
        `  while [ -e '${base}/held-'$$ ]; do sleep 0.05; done`,
        "fi",
        "test -f README.md",
        "",
      ].join("\n"),
    );
    chmodSync(check, 0o755);
    const { productId, state } = await completeNotes(base, repo, {
      verify: { commands: [{ name: "check", run: `'${check}'`, timeoutMs: 120_000 }] },
    });
    expect(worktreePaths(repo)).toEqual([repo]);

    /** Starts `verify` with a hold token laid down; resolves the process and the folder its check runs in. */
    const startHolding = async (): Promise<{ child: ChildProcess; exited: Promise<number | null>; cwd: string }> => {
      const before = new Set(readdirSync(base).filter((f) => f.startsWith("started-")));
      writeFileSync(join(base, "hold"), "");
      const child = spawn(process.execPath, [CLI, "verify", productId, "--state", state], {
        cwd: base,
        stdio: ["ignore", "ignore", "ignore"],
      });
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      const started = await until("the check to hold", () =>
        readdirSync(base).find((f) => f.startsWith("started-") && !before.has(f)),
      );
      return { child, exited, cwd: readFileSync(join(base, started), "utf8").trim() };
    };

    // A: killed with SIGKILL while its check runs. Its verify worktree stays behind (folder and registration).
    const a = await startHolding();
    a.child.kill("SIGKILL");
    await a.exited;
    expect(existsSync(a.cwd)).toBe(true);
    const stale = worktreePaths(repo).filter((p) => p.startsWith(verifyRoot));
    expect(stale).toHaveLength(1);
    expect(git(repo, "worktree", "list")).toContain(".manual-");

    // B: alive, its check holding.
    const b = await startHolding();
    try {
      // C: the next verify. It removes A's worktree (its owner is dead), never B's (alive), and its own when done.
      const c = await runCli(["verify", productId, "--state", state], base);
      expect(c.code, c.stderr).toBe(0);
      expect(c.stdout).toMatch(/ok +check/);
      expect(existsSync(a.cwd)).toBe(false);
      expect(existsSync(b.cwd)).toBe(true);
      const left = worktreePaths(repo).filter((p) => p.startsWith(verifyRoot));
      expect(left).toHaveLength(1);
      expect(b.cwd.startsWith(left[0] as string) || (left[0] as string).startsWith(b.cwd)).toBe(true);
      expect(readdirSync(verifyRoot).filter((n) => n.startsWith(".trash-"))).toEqual([]);
    } finally {
      // B's check is released; B ends green and removes its own worktree.
      for (const f of readdirSync(base).filter((n) => n.startsWith("held-"))) rmSync(join(base, f), { force: true });
    }
    expect(await b.exited).toBe(0);
    expect(worktreePaths(repo)).toEqual([repo]);
    expect(readdirSync(verifyRoot)).toEqual([]);
  }, 180_000);

  it("is removed when a server starts a product of the repository, even one without checks", async () => {
    const repo = makeRepo({ "README.md": "# app\n" });
    const base = tempDir("acp-orch-verify-sweep-");
    const verifyRoot = join(repo, ".git", "acp-orchestrator", "verify");
    // A verify folder with a real worktree, owned by a process that is provably gone (a finished child, this host).
    const { host, scope } = new ProcessLiveness().identity;
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid as number;
    mkdirSync(join(verifyRoot, "prd_dead"), { recursive: true });
    git(repo, "worktree", "add", "--detach", "-q", join(verifyRoot, "prd_dead", "slot-1"), "HEAD");
    writeFileSync(join(verifyRoot, "prd_dead", "owner"), `${host}:${gone}:12345:${scope}\n`);
    expect(worktreePaths(repo)).toHaveLength(2);

    await completeNotes(base, repo);
    expect(existsSync(join(verifyRoot, "prd_dead"))).toBe(false);
    expect(worktreePaths(repo)).toEqual([repo]);
  }, 120_000);
});
