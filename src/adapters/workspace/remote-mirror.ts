/**
 * RemoteWorkspace: the `WorkspacePort` of remote-backed products (issue 33; docs/FLEET.md, "Code through a git
 * remote"). Every method's `cwd` is the product's remote URL (validated, without credentials: protocol/
 * workspace-remote.ts). The server keeps one local mirror clone per remote under its workspace root
 * (`<root>/mirrors/<sha-256 of the URL>.git`, `git clone --mirror`, so its refs are the remote's as of the last
 * fetch) and hands everything else (worktrees, capture, merge, release) to a `GitWorkspace` over that mirror.
 *
 * Integrated means pushed: `moveRef` is `git push --force-with-lease=<ref>:<expected> <url> <to>:<ref>`, a
 * compare-and-swap on the remote's ref, and the mirror's ref moves only after the remote acknowledged it. A push the
 * remote refused because its ref is not at `expected` (`stale info`) answers false after a fetch (unless the ref is
 * at `to` already), like a local CAS failure; a commit the mirror does not hold (local work of a dead server) answers
 * false too. A remote that cannot be reached or refuses for another reason (a hook) throws `RemoteWorkspaceError`,
 * naming the remote. The mirror is fetched when this process first uses it (take-over), on `refresh`, and before
 * each `prepare`; fetches, pushes and worktree administration of one mirror are serialised, within the process and
 * across processes, by worktree-lock.ts (a fetch must never write back a ref a concurrent push just moved).
 *
 * Credentials come from git itself (credential helpers, SSH agent, the environment); prompts are off (git-cli.ts).
 * Owns the mirrors under the root; must never touch a product's `cwd`.
 */
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { CaptureResult, MergeOutcome, TargetOutcome, WorkspaceInfo, WorkspacePort } from "../../core/ports.js";
import type { RefMove } from "../../core/workspace/records.js";
import { git, runGit, runRemoteGit, type RemoteGitResult } from "./git-cli.js";
import { GitWorkspace } from "./git-workspace.js";
import { withWorktreeAdmin } from "./worktree-lock.js";
import { nodeCrypto } from "../system/node-builtins.js";

/** The default deadline of one git call that talks to a remote (a first clone of a large remote must fit in it). */
export const DEFAULT_REMOTE_TIMEOUT_MS = 300_000;

/** A remote that could not be reached, or that refused an update for a reason other than a moved ref. */
export class RemoteWorkspaceError extends Error {
  override readonly name = "RemoteWorkspaceError";
  constructor(
    readonly remote: string,
    what: string,
    result: RemoteGitResult,
  ) {
    const lines = (result.stderr || result.stdout)
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && l !== "Done" && !l.startsWith("To "));
    // A stopped call's detail is its last line (the deadline), whatever git printed before it hung.
    const detail = (result.timedOut ? lines.slice(-1) : lines.slice(0, 2)).join(" ").slice(0, 500);
    super(`The git remote ${remote} ${what}: ${detail || `git exited with ${result.code}`}.`);
    this.timedOut = result.timedOut === true;
  }
  /** True when the remote did not answer within the deadline (its git process group was killed). */
  readonly timedOut: boolean;
}

/** Per-ref outcome of `git push --porcelain`: `ok` (moved, created, deleted or already there), `stale`, `refused`. */
function pushOutcome(stdout: string, ref: string): "ok" | "stale" | "refused" | null {
  for (const line of stdout.split("\n")) {
    const [flag, spec, summary] = line.split("\t");
    if (spec === undefined || !spec.endsWith(`:${ref}`)) continue;
    if (flag === "!") return summary?.includes("(stale info)") === true ? "stale" : "refused";
    return "ok";
  }
  return null;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Remote-backed products' worktrees and integration over a mirror per remote (see the file comment). */
export class RemoteWorkspace implements WorkspacePort {
  /** The mirror directory per remote, once cloned (or found) and fetched by this process. */
  private readonly mirrors = new Map<string, Promise<string>>();

  /**
   * @param root the server's workspace root (`serve --workspace-root`), absolute; created when missing.
   * @param local the adapter that runs worktrees, captures and merges inside a mirror.
   * @param options.timeoutMs the deadline of each git call that talks to the remote (clone, fetch, push), in ms
   *   (default `DEFAULT_REMOTE_TIMEOUT_MS`): past it git's process group is killed and the call throws
   *   `RemoteWorkspaceError` with `timedOut`, so a remote that never answers pauses the product like one that is away.
   */
  constructor(
    private readonly root: string,
    private readonly local: GitWorkspace = new GitWorkspace(),
    options: { timeoutMs?: number } = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_REMOTE_TIMEOUT_MS;
  }

  private readonly timeoutMs: number;

  /** Runs a git command that talks to the remote, under the deadline (git-cli.ts runRemoteGit). */
  private remoteGit(cwd: string, args: readonly string[]): Promise<RemoteGitResult> {
    return runRemoteGit(cwd, args, this.timeoutMs);
  }

  /** The mirror directory of `remote` under the root (from a hash of the URL; nothing is created). */
  mirrorPath(remote: string): string {
    const id = nodeCrypto().createHash("sha256").update(remote).digest("hex").slice(0, 32);
    return join(this.root, "mirrors", `${id}.git`);
  }

  /** The mirror of `remote`: cloned when this server has none yet, fetched on this process's first use. */
  private mirror(remote: string): Promise<string> {
    let dir = this.mirrors.get(remote);
    if (!dir) {
      dir = this.open(remote);
      dir.catch(() => this.mirrors.delete(remote));
      this.mirrors.set(remote, dir);
    }
    return dir;
  }

  private async open(remote: string): Promise<string> {
    const dir = this.mirrorPath(remote);
    const cloned = await withWorktreeAdmin(`${dir}.admin`, async () => {
      if (await exists(join(dir, "HEAD"))) return false;
      await mkdir(join(this.root, "mirrors"), { recursive: true });
      const tmp = `${dir}.clone-${process.pid}-${Math.random().toString(36).slice(2)}`;
      const r = await this.remoteGit(this.root, ["clone", "--mirror", "--quiet", "--", remote, tmp]);
      if (r.code !== 0) {
        await rm(tmp, { recursive: true, force: true });
        throw new RemoteWorkspaceError(remote, "could not be cloned", r);
      }
      await rename(tmp, dir);
      return true;
    });
    if (!cloned) await withWorktreeAdmin(dir, () => this.fetchLocked(remote, dir));
    return dir;
  }

  /** Fetches every ref of the remote into the mirror (pruning what the remote no longer has). Hold the mirror lock. */
  private async fetchLocked(remote: string, dir: string): Promise<void> {
    const r = await this.remoteGit(dir, [
      "fetch",
      "--prune",
      "--quiet",
      "--no-write-fetch-head",
      "--",
      remote,
      "+refs/*:refs/*",
    ]);
    if (r.code !== 0) throw new RemoteWorkspaceError(remote, "could not be fetched", r);
  }

  private async hasCommit(dir: string, commit: string): Promise<boolean> {
    return (await runGit(dir, ["cat-file", "-e", `${commit}^{commit}`])).code === 0;
  }

  /** Fetches the remote into its mirror now (take-over, resume): the refs read next are the remote's. */
  async refresh(remote: string): Promise<void> {
    const dir = await this.mirror(remote);
    await withWorktreeAdmin(dir, () => this.fetchLocked(remote, dir));
  }

  async inspect(remote: string): Promise<WorkspaceInfo> {
    let dir: string;
    try {
      dir = await this.mirror(remote);
    } catch (err) {
      return { kind: "none", reason: err instanceof Error ? err.message : String(err) };
    }
    const head = await this.local.readRef(dir, "HEAD");
    if (head === null) return { kind: "none", reason: `The git remote ${remote} has no commit to start from.` };
    const branch = await runGit(dir, ["symbolic-ref", "-q", "--short", "HEAD"]);
    return { kind: "git", head, branch: branch.code === 0 ? branch.stdout.trim() || null : null };
  }

  async attemptPath(remote: string, productId: string, taskId: string, attempt: number): Promise<string> {
    return this.local.attemptPath(await this.mirror(remote), productId, taskId, attempt);
  }

  async readRef(remote: string, ref: string): Promise<string | null> {
    return this.local.readRef(await this.mirror(remote), ref);
  }

  /**
   * Pushes `to` to the remote's `ref` only if the remote's `ref` is at `expected` (`null`: absent), then moves the
   * mirror's ref. True when the remote's ref is at `to` afterwards; false when it is elsewhere or the mirror lacks
   * `to`. Throws `RemoteWorkspaceError` when the remote cannot be reached or refuses the update otherwise.
   */
  async moveRef(remote: string, ref: string, to: string, expected: string | null): Promise<boolean> {
    return (await this.moveRefs(remote, [{ ref, to, expected }]))[0] === true;
  }

  /**
   * `moveRef` for several refs in ONE push (`git push --porcelain` with a `--force-with-lease=<ref>:<expected>` per
   * ref, not atomic: each ref's lease decides for that ref alone), so a task's attempt ref and the integration branch
   * cost one round trip. Each mirror ref moves only after the remote acknowledged that ref. A ref whose lease failed
   * (`stale info`) answers false after one fetch, unless the remote has it at `to` already; a move whose commit the
   * mirror lacks answers false without being pushed. Throws `RemoteWorkspaceError` (nothing moved in the mirror for
   * the refs not acknowledged) when the remote cannot be reached, does not answer in time, or refuses a ref otherwise.
   */
  async moveRefs(remote: string, moves: readonly RefMove[]): Promise<boolean[]> {
    const dir = await this.mirror(remote);
    return withWorktreeAdmin(dir, async () => {
      const answers: (boolean | null)[] = [];
      for (const m of moves) answers.push((await this.hasCommit(dir, m.to)) ? null : false);
      const pushed = moves.filter((_, i) => answers[i] === null);
      if (pushed.length === 0) return answers.map((a) => a === true);
      const leases = pushed.map((m) => `--force-with-lease=${m.ref}:${m.expected ?? ""}`);
      const r = await this.remoteGit(dir, [
        "push",
        "--porcelain",
        ...leases,
        "--",
        remote,
        ...pushed.map((m) => `${m.to}:${m.ref}`),
      ]);
      const outcomes = pushed.map((m) => pushOutcome(r.stdout, m.ref));
      for (const [i, m] of pushed.entries())
        if (outcomes[i] === "ok") await git(dir, ["update-ref", "-m", "acp-orchestrator push", m.ref, m.to]);
      const ok = (o: string | null) => o === "ok" || (o === null && r.code === 0);
      if (
        outcomes.some((o) => o === "refused" || (o === null && r.code !== 0)) ||
        (r.code !== 0 && !outcomes.some((o) => o === "stale"))
      )
        throw new RemoteWorkspaceError(remote, "did not accept the update", r);
      if (outcomes.some((o) => o === "stale")) await this.fetchLocked(remote, dir);
      let next = 0;
      for (const [i, m] of moves.entries()) {
        if (answers[i] !== null) continue;
        const outcome = outcomes[next++] ?? null;
        answers[i] = ok(outcome) || (await this.local.readRef(dir, m.ref)) === m.to;
      }
      return answers.map((a) => a === true);
    });
  }

  async deleteRefs(remote: string, refs: string[], prefix?: string): Promise<void> {
    const dir = await this.mirror(remote);
    await withWorktreeAdmin(dir, async () => {
      const all = new Set(refs);
      if (prefix)
        for (const name of (await git(dir, ["for-each-ref", "--format=%(refname)", prefix])).split("\n"))
          if (name !== "") all.add(name);
      const existing: string[] = [];
      for (const ref of all)
        if ((await runGit(dir, ["show-ref", "--verify", "-q", ref])).code === 0) existing.push(ref);
      if (existing.length === 0) return;
      const r = await this.remoteGit(dir, ["push", "--porcelain", "--", remote, ...existing.map((ref) => `:${ref}`)]);
      if (r.code !== 0) throw new RemoteWorkspaceError(remote, "did not accept the deletion of the product's refs", r);
    });
    await this.local.deleteRefs(dir, refs, prefix);
  }

  /**
   * Fetches the mirror (a failure is tolerated when the mirror holds `base` already: the push that follows the task
   * will find out whether the remote is back), then prepares the worktree from it (GitWorkspace.prepare).
   */
  async prepare(remote: string, path: string, base: string): Promise<void> {
    const dir = await this.mirror(remote);
    try {
      await withWorktreeAdmin(dir, () => this.fetchLocked(remote, dir));
    } catch (err) {
      if (!(await this.hasCommit(dir, base))) throw err;
    }
    await this.local.prepare(dir, path, base);
  }

  capture(path: string, message: string, base: string): Promise<CaptureResult> {
    return this.local.capture(path, message, base);
  }

  async merge(remote: string, head: string, commit: string, message: string): Promise<MergeOutcome> {
    return this.local.merge(await this.mirror(remote), head, commit, message);
  }

  async release(remote: string, path: string, options?: { reuse?: boolean }): Promise<void> {
    await this.local.release(await this.mirror(remote), path, options);
  }

  async leftovers(remote: string, productId: string): Promise<string[]> {
    return this.local.leftovers(await this.mirror(remote), productId);
  }

  async removeProductFolder(remote: string, productId: string): Promise<void> {
    return this.local.removeProductFolder(await this.mirror(remote), productId);
  }

  /** Refused: a remote product's result is its pushed branch (integration mode `merge` is for local products). */
  integrateInto(remote: string): Promise<TargetOutcome> {
    return Promise.reject(
      new Error(`A product with the git remote ${remote} ends on its pushed branch; there is no target to merge into.`),
    );
  }
}
