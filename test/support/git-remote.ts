/**
 * A bare git repository as a product's remote, for the remote-backed product tests (issue 33): made from a fresh
 * repository with the given files; a `reference-transaction` hook logs every ref update the remote commits
 * (`<old> <new> <ref>` per line) to a file outside it, and a `pre-receive` hook refuses every push while
 * `refuse(true)` is in force (and counts every push, `pushes()`). `backwardMoves` reads the log back and names every
 * update of a ref under a prefix that
 * was not a fast-forward (the old head not an ancestor of the new one; creation and deletion excepted).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git, makeRepo } from "./git-repo.js";
import { tempDir } from "./server-process.js";

const ZERO = /^0+$/;

export interface BareRemote {
  /** The bare repository (a path URL). */
  dir: string;
  /** The update log. */
  log: string;
  /** While true, every push is refused by the pre-receive hook. */
  refuse(on: boolean): void;
  /** Every committed update, in order. */
  updates(): { old: string; new: string; ref: string }[];
  /** Non-fast-forward moves of refs starting with `prefix` (plain words, empty when none). */
  backwardMoves(prefix: string): string[];
  /** How many pushes reached the remote (each runs its pre-receive hook once, whatever it carries). */
  pushes(): number;
  /** The commit `ref` points at on the remote, or null. */
  read(ref: string): string | null;
}

export function makeBareRemote(files: Record<string, string> = { "README.md": "# Remote\n" }): BareRemote {
  const source = makeRepo(files);
  const dir = join(tempDir("acp-orch-remote-"), "remote.git");
  git(source, "clone", "-q", "--bare", source, dir);
  rmSync(source, { recursive: true, force: true });
  const log = join(dir, "..", "ref-updates.log");
  writeFileSync(log, "");
  const refuseFlag = join(dir, "..", "refuse-pushes");
  const pushLog = join(dir, "..", "pushes.log");
  writeFileSync(pushLog, "");
  const hooks = join(dir, "hooks");
  writeFileSync(
    join(hooks, "reference-transaction"),
    `#!/bin/sh\n[ "$1" = committed ] || { cat >/dev/null; exit 0; }\nwhile read old new ref; do echo "$old $new $ref" >> '${log}'; done\n`,
  );
  writeFileSync(
    join(hooks, "pre-receive"),
    `#!/bin/sh\ncat >/dev/null\necho push >> '${pushLog}'\nif [ -e '${refuseFlag}' ]; then echo "pushes are refused by the test's hook" >&2; exit 1; fi\n`,
  );
  chmodSync(join(hooks, "reference-transaction"), 0o755);
  chmodSync(join(hooks, "pre-receive"), 0o755);
  const updates = () =>
    readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => {
        const [old = "", next = "", ref = ""] = l.split(" ");
        return { old, new: next, ref };
      });
  return {
    dir,
    log,
    refuse(on) {
      if (on) writeFileSync(refuseFlag, "");
      else rmSync(refuseFlag, { force: true });
    },
    updates,
    backwardMoves(prefix) {
      const out: string[] = [];
      for (const u of updates()) {
        if (!u.ref.startsWith(prefix) || ZERO.test(u.old) || ZERO.test(u.new)) continue;
        try {
          execFileSync("git", ["merge-base", "--is-ancestor", u.old, u.new], { cwd: dir, stdio: "ignore" });
        } catch {
          out.push(`${u.ref}: ${u.old} -> ${u.new} is not a fast-forward`);
        }
      }
      return out;
    },
    pushes: () =>
      readFileSync(pushLog, "utf8")
        .split("\n")
        .filter((l) => l !== "").length,
    read(ref) {
      if (!existsSync(dir)) return null;
      try {
        return git(dir, "rev-parse", "-q", "--verify", `${ref}^{commit}`);
      } catch {
        return null;
      }
    },
  };
}

/** The task files each non-merge commit of `ref` adds or changes, one entry per (commit, file), sorted. */
export function changesOn(remoteDir: string, ref: string): string[] {
  return git(remoteDir, "log", "--no-merges", "--format=", "--name-only", ref)
    .split("\n")
    .filter((l) => l.startsWith("tasks/"))
    .sort();
}
