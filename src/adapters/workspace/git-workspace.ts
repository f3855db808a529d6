/**
 * GitWorkspace: the `WorkspacePort` over a local git repository (DESIGN.md, Workspaces and integration; guarantee 11).
 *
 * Task attempts get detached worktrees under `<git-common-dir>/acp-orchestrator/worktrees/<productId>/`, so they never
 * show in the user's `git status`. Results are committed in the worktree, merged without any checkout
 * (`git merge-tree --write-tree` + `git commit-tree`), and every ref move is `git update-ref <ref> <new> <old>`: a
 * compare-and-swap on the expected head, so a step repeated after a crash either finds the ref where it left it or
 * refuses. Hooks and commit signing are switched off for the commands it runs (they are the orchestrator's commits,
 * not the user's).
 *
 * It decides nothing (the core does: src/core/workspace/) and must never touch the user's working tree or branches,
 * except `integrateInto` a target branch when the product's integration mode is `merge`.
 */
import { mkdir, readdir, rm } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import type { MergeOutcome, WorkspaceInfo, WorkspacePort } from "../../core/ports.js";
import { git, runGit } from "./git-cli.js";

/** `git -c …` options for commands that could run the user's hooks or ask for a signature. */
const QUIET = ["-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "advice.detachedHead=false"];

/** A path component made of safe characters only (task ids are validated ids already; this is a second fence). */
function component(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 100) || "_";
}

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.length > 0);
}

export class GitWorkspace implements WorkspacePort {
  /** Git common directory per cwd (a repository does not move while the server runs). */
  private readonly commonDirs = new Map<string, Promise<string>>();

  async inspect(cwd: string): Promise<WorkspaceInfo> {
    try {
      const inside = await runGit(cwd, ["rev-parse", "--is-inside-work-tree"]);
      if (inside.code !== 0 || inside.stdout.trim() !== "true") {
        return { kind: "none", reason: `${cwd} is not inside a git working tree, so tasks share it.` };
      }
      const head = await runGit(cwd, ["rev-parse", "-q", "--verify", "HEAD^{commit}"]);
      if (head.code !== 0) {
        return {
          kind: "none",
          reason: `The git repository at ${cwd} has no commit yet, so there is nothing to branch from and tasks share the folder; commit once to get one worktree per task.`,
        };
      }
      const branch = await runGit(cwd, ["symbolic-ref", "-q", "--short", "HEAD"]);
      return { kind: "git", head: head.stdout.trim(), branch: branch.code === 0 ? branch.stdout.trim() || null : null };
    } catch (err) {
      return { kind: "none", reason: `git cannot be run here (${err instanceof Error ? err.message : String(err)}), so tasks share ${cwd}.` };
    }
  }

  private commonDir(cwd: string): Promise<string> {
    let dir = this.commonDirs.get(cwd);
    if (!dir) {
      dir = git(cwd, ["rev-parse", "--path-format=absolute", "--git-common-dir"]).then((out) => resolve(out.trim()));
      dir.catch(() => this.commonDirs.delete(cwd));
      this.commonDirs.set(cwd, dir);
    }
    return dir;
  }

  private async productDir(cwd: string, productId: string): Promise<string> {
    return join(await this.commonDir(cwd), "acp-orchestrator", "worktrees", component(productId));
  }

  async attemptPath(cwd: string, productId: string, taskId: string, attempt: number): Promise<string> {
    return join(await this.productDir(cwd, productId), `${component(taskId)}-${attempt}`);
  }

  async readRef(cwd: string, ref: string): Promise<string | null> {
    const r = await runGit(cwd, ["rev-parse", "-q", "--verify", `${ref}^{commit}`]);
    return r.code === 0 ? r.stdout.trim() : null;
  }

  async moveRef(cwd: string, ref: string, to: string, expected: string | null): Promise<boolean> {
    const r = await runGit(cwd, ["update-ref", "-m", "acp-orchestrator", ref, to, expected ?? ""]);
    if (r.code === 0) return true;
    return (await this.readRef(cwd, ref)) === to;
  }

  async deleteRefs(cwd: string, refs: string[], prefix?: string): Promise<void> {
    const all = new Set(refs);
    if (prefix) for (const name of lines(await git(cwd, ["for-each-ref", "--format=%(refname)", prefix]))) all.add(name);
    const existing: string[] = [];
    for (const ref of all) if ((await runGit(cwd, ["show-ref", "--verify", "-q", ref])).code === 0) existing.push(ref);
    if (existing.length === 0) return;
    await git(cwd, ["update-ref", "--stdin"], existing.map((ref) => `delete ${ref}\n`).join(""));
  }

  async prepare(cwd: string, path: string, base: string): Promise<void> {
    const existing = await runGit(path, ["rev-parse", "--show-toplevel"]).catch(() => null);
    if (existing && existing.code === 0 && resolve(existing.stdout.trim()) === resolve(path)) return;
    await rm(path, { recursive: true, force: true });
    await mkdir(join(path, ".."), { recursive: true });
    await git(cwd, [...QUIET, "worktree", "add", "--detach", "-f", "-q", path, base]);
  }

  async capture(path: string, message: string): Promise<{ commit: string | null; changedFiles: string[] }> {
    await git(path, ["add", "-A"]);
    const changedFiles = (await git(path, ["diff", "--cached", "--name-only", "-z"])).split("\0").filter((f) => f.length > 0);
    if (changedFiles.length === 0) return { commit: null, changedFiles };
    await git(path, [...QUIET, "commit", "-q", "--no-verify", "-F", "-"], message);
    return { commit: (await git(path, ["rev-parse", "HEAD"])).trim(), changedFiles };
  }

  async merge(cwd: string, head: string, commit: string, message: string): Promise<MergeOutcome> {
    if ((await runGit(cwd, ["merge-base", "--is-ancestor", head, commit])).code === 0) return { kind: "fastForward", commit };
    if ((await runGit(cwd, ["merge-base", "--is-ancestor", commit, head])).code === 0) return { kind: "fastForward", commit: head };
    const tree = await this.mergeTree(cwd, head, commit);
    if (tree.kind === "conflict") return tree;
    const merged = await git(cwd, [...QUIET, "commit-tree", tree.tree, "-p", head, "-p", commit, "-F", "-"], message);
    return { kind: "merge", commit: merged.trim() };
  }

  /** The merged tree of two commits, or the conflicting files. Writes objects only. */
  private async mergeTree(cwd: string, a: string, b: string): Promise<{ kind: "tree"; tree: string } | { kind: "conflict"; files: string[] }> {
    const r = await runGit(cwd, ["merge-tree", "--write-tree", "--name-only", "--no-messages", a, b]);
    const out = lines(r.stdout);
    if (r.code === 0 && out[0]) return { kind: "tree", tree: out[0] };
    if (r.code === 1) return { kind: "conflict", files: [...new Set(out.slice(1))].sort() };
    throw new Error(`git merge-tree failed (exit ${r.code}): ${(r.stderr || r.stdout).trim().split("\n")[0] ?? ""}`);
  }

  async release(cwd: string, path: string): Promise<void> {
    const r = await runGit(cwd, ["worktree", "remove", "--force", "--force", path]);
    if (r.code !== 0) {
      await rm(path, { recursive: true, force: true });
      await runGit(cwd, ["worktree", "prune"]);
    }
  }

  async leftovers(cwd: string, productId: string): Promise<string[]> {
    const dir = await this.productDir(cwd, productId);
    const found = new Set<string>();
    const listed = await runGit(cwd, ["worktree", "list", "--porcelain"]);
    for (const line of lines(listed.stdout)) {
      if (!line.startsWith("worktree ")) continue;
      const path = resolve(line.slice("worktree ".length));
      if (path.startsWith(dir + sep)) found.add(path);
    }
    try {
      for (const name of await readdir(dir)) found.add(join(dir, name));
    } catch {
      // no directory: nothing left over
    }
    return [...found].sort();
  }

  async integrateInto(
    cwd: string,
    target: string,
    head: string,
    message: string,
  ): Promise<{ state: "integrated"; head: string } | { state: "conflict"; files: string[] }> {
    const ref = `refs/heads/${target}`;
    const current = await this.readRef(cwd, ref);
    if (current === null) {
      if (await this.moveRef(cwd, ref, head, null)) return { state: "integrated", head };
      throw new Error(`The branch ${target} appeared while it was being created; nothing was changed.`);
    }
    const checkedOut = (await runGit(cwd, ["symbolic-ref", "-q", "--short", "HEAD"])).stdout.trim() === target;
    if (checkedOut) {
      // The user's working tree follows its branch: git updates both, or neither (abort on a conflict).
      const r = await runGit(cwd, [...QUIET, "merge", "--no-edit", "-m", message, head]);
      if (r.code === 0) return { state: "integrated", head: (await git(cwd, ["rev-parse", "HEAD"])).trim() };
      const files = lines((await runGit(cwd, ["diff", "--name-only", "--diff-filter=U"])).stdout);
      await runGit(cwd, ["merge", "--abort"]);
      return { state: "conflict", files: files.length > 0 ? files : lines(r.stdout).slice(0, 20) };
    }
    const outcome = await this.merge(cwd, current, head, message);
    if (outcome.kind === "conflict") return { state: "conflict", files: outcome.files };
    if (await this.moveRef(cwd, ref, outcome.commit, current)) return { state: "integrated", head: outcome.commit };
    throw new Error(`The branch ${target} moved while the product was being merged into it; nothing was changed.`);
  }
}
