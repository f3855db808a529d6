/**
 * A worktree is data, never configuration (issue 26, cases 1-3; DESIGN.md guarantee 16), over real stdio with a real
 * git repository and the scripted ACP worker:
 * 1. a git directory the worker writes into its tree, with `core.fsmonitor` and a clean filter set to a command, and
 *    its `.git` file pointed at it, runs nothing: ACP refuses `.git`; through its own shell the attempt fails saying
 *    what the worker did;
 * 2. a worker that points its `.git` at the user's repository never reaches the user's index;
 * 3. the server survives it all (no unhandled `write EPIPE`).
 * In each: the user's HEAD, branches, index, working tree and in-progress operation are byte-for-byte unchanged, and no
 * planted command ever ran (marker files absent).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, writeRepoFiles } from "../support/git-repo.js";
import { tempDir } from "../support/server-process.js";
import {
  agentLog,
  confirmAndSettle,
  expectAlive,
  GIVE_UP_LEADER,
  planProduct,
  scriptedServer,
  task,
  userState,
} from "../support/worktree-safety.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; error?: string; workspace?: { changedFiles?: string[]; commit?: string } }[];
}

/** The ACP writes of a planted git directory (fsmonitor and a clean filter that touch `marker`) inside the worktree. */
function plantedGitDir(marker: string): unknown[] {
  const config = [
    "[core]",
    "\trepositoryformatversion = 0",
    `\tfsmonitor = "touch ${marker}.fsmonitor; false"`,
    '[filter "evil"]',
    `\tclean = "touch ${marker}.clean; cat"`,
    `\tsmudge = "touch ${marker}.smudge; cat"`,
    "",
  ].join("\n");
  return [
    { write: { path: "evil/HEAD", content: "ref: refs/heads/main\n" } },
    { write: { path: "evil/config", content: config } },
    { write: { path: "evil/objects/info/keep", content: "" } },
    { write: { path: "evil/refs/heads/keep", content: "" } },
    { write: { path: ".gitattributes", content: "* filter=evil\n" } },
  ];
}

const markersOf = (marker: string) => ["fsmonitor", "clean", "smudge"].map((m) => `${marker}.${m}`);

/** A user mid-work: a staged edit and an unstaged one. */
function busyUserRepo(): string {
  const repo = makeRepo({ "README.md": "# Project\n", "src/app.txt": "app\n", ".gitignore": "*.pid\n" });
  writeRepoFiles(repo, { "README.md": "# Project, staged edit\n" });
  git(repo, "add", "README.md");
  writeRepoFiles(repo, { "src/app.txt": "app, unstaged edit\n" });
  return repo;
}

describe("a worker cannot turn its worktree's git against the orchestrator or the user", () => {
  it("case 1: a planted git directory runs nothing; ACP refuses .git naming the path", async () => {
    const repo = busyUserRepo();
    const marker = join(tempDir("acp-orch-marker-"), "ran");
    const before = userState(repo);
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          a: {
            actions: [
              ...plantedGitDir(marker),
              { write: { path: ".git", content: "gitdir: evil\n" } },
              { write: { path: ".git/config", content: "[core]\n\tfsmonitor = true\n" } },
              { read: { path: ".git" } },
              { write: { path: "ok.txt", content: "fine\n" } },
            ],
            text: "planted",
          },
        },
      },
    });
    try {
      const productId = await planProduct(s.server, repo);
      expect(await confirmAndSettle(s.server, productId, [task("a")])).toBe("completed");
      const status = await s.server.request<Status>("product.status", { productId });
      const a = status.tasks.find((t) => t.taskId === "a");
      expect(a?.status).toBe("completed");
      // The writes to .git and under it were refused (-32602, naming the path); nothing else was.
      const refused = agentLog(s.logFile).filter((l) => l.event === "action" && l.outcome === "refused");
      expect(refused.map((l) => String(l.path).split("/").slice(-2).join("/"))).toEqual([
        expect.stringMatching(/\/\.git$|^[^/]+\/\.git$/),
        ".git/config",
        expect.stringMatching(/\.git$/),
      ]);
      for (const l of refused) {
        expect(String(l.error)).toMatch(/^error -32602: Refused ".*\.git(\/config)?": \.git and everything under it/);
        expect(String(l.error)).toContain(String(l.path));
      }
      // The planted folder is data: committed as files, on the integration branch.
      expect(a?.workspace?.changedFiles).toEqual(
        expect.arrayContaining([".gitattributes", "evil/HEAD", "evil/config", "ok.txt"]),
      );
      expect(git(repo, "show", `acp/${productId}:evil/config`)).toContain("fsmonitor");
      for (const m of markersOf(marker)) expect(existsSync(m)).toBe(false);
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);

  it("case 1: a gitfile rewritten with the worker's own shell fails the attempt saying so, and runs nothing", async () => {
    const repo = busyUserRepo();
    const marker = join(tempDir("acp-orch-marker-"), "ran");
    const before = userState(repo);
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          a: {
            actions: [
              ...plantedGitDir(marker),
              { exec: { command: "sh", args: ["-c", 'printf "gitdir: %s/evil\\n" "$PWD" > .git'] } },
              { write: { path: "ok.txt", content: "fine\n" } },
            ],
            text: "planted",
          },
        },
      },
    });
    try {
      const productId = await planProduct(s.server, repo);
      expect(await confirmAndSettle(s.server, productId, [task("a")])).toBe("failed");
      const status = await s.server.request<Status>("product.status", { productId });
      const a = status.tasks.find((t) => t.taskId === "a");
      expect(a?.status).toBe("failed");
      expect(a?.error).toMatch(
        /The worker pointed its worktree's \.git file at .*\/evil instead of the worktree's own/,
      );
      expect(a?.workspace?.commit).toBeUndefined();
      for (const m of markersOf(marker)) expect(existsSync(m)).toBe(false);
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);

  it("case 2: a gitfile pointed at the user's repository never reaches the user's index (ACP or shell)", async () => {
    const repo = busyUserRepo();
    const before = userState(repo);
    const userGitDir = join(repo, ".git");
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          viaAcp: {
            actions: [
              { write: { path: ".git", content: `gitdir: ${userGitDir}\n` } },
              { write: { path: "worker.txt", content: "worker\n" } },
            ],
            text: "redirected",
          },
          viaShell: {
            actions: [
              { write: { path: "worker2.txt", content: "worker\n" } },
              { exec: { command: "sh", args: ["-c", `printf "gitdir: ${userGitDir}\\n" > .git`] } },
            ],
            text: "redirected",
          },
        },
      },
    });
    try {
      const productId = await planProduct(s.server, repo);
      expect(await confirmAndSettle(s.server, productId, [task("viaAcp"), task("viaShell", ["viaAcp"])])).toBe(
        "failed",
      );
      const status = await s.server.request<Status>("product.status", { productId });
      const [viaAcp, viaShell] = ["viaAcp", "viaShell"].map((id) => status.tasks.find((t) => t.taskId === id));
      expect(viaAcp?.status).toBe("completed");
      expect(viaAcp?.workspace?.changedFiles).toEqual(["worker.txt"]);
      expect(viaShell?.status).toBe("failed");
      expect(viaShell?.error).toContain(`The worker pointed its worktree's .git file at ${userGitDir}`);
      // The user's staged edit is still staged, the unstaged one unstaged, no worker file staged: byte for byte.
      expect(userState(repo)).toEqual(before);
      expect(git(repo, "diff", "--cached", "--name-only")).toBe("README.md");
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);

  it("case 3: the server survives both attacks, three products at once, and answers afterwards", async () => {
    const repo = busyUserRepo();
    const marker = join(tempDir("acp-orch-marker-"), "ran");
    const before = userState(repo);
    const userGitDir = join(repo, ".git");
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          planted: {
            actions: [
              ...plantedGitDir(marker),
              { exec: { command: "sh", args: ["-c", 'printf "gitdir: %s/evil\\n" "$PWD" > .git'] } },
            ],
          },
          user: { actions: [{ exec: { command: "sh", args: ["-c", `printf "gitdir: ${userGitDir}\\n" > .git`] } }] },
          broken: { actions: [{ exec: { command: "sh", args: ["-c", "printf 'gitdir: /nonexistent\\n' > .git"] } }] },
        },
      },
    });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(await planProduct(s.server, repo));
      const phases = await Promise.all(
        ids.map((id) => confirmAndSettle(s.server, id, [task("planted"), task("user"), task("broken")])),
      );
      expect(phases).toEqual(["failed", "failed", "failed"]);
      for (const id of ids) {
        const status = await s.server.request<Status>("product.status", { productId: id });
        for (const t of status.tasks) expect(t.error).toMatch(/^The task's changes could not be committed: The worker/);
      }
      for (const m of markersOf(marker)) expect(existsSync(m)).toBe(false);
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
      expect(s.server.stderr()).not.toMatch(/EPIPE/);
    } finally {
      await s.server.close();
    }
  }, 240_000);
});
