/**
 * The racy-git hole of a reused verify worktree, forced deterministically (DESIGN.md guarantee 17; docs/VERIFY.md
 * "Verify worktrees"; issue 30, 0926349). Before each check the verifier puts back the index from the copy it took
 * after the last preparation. git trusts an index entry whose stat data matches the file (it compares seconds only,
 * ctime included) unless the entry is "racy": its mtime is not older than the index file's own mtime, and then it
 * compares the content. So the restored index must keep the mtime git wrote it with: were it written "now", every
 * entry would look proven by stat, and a check that rewrote a tracked file in the preparation's second (ctime in that
 * second, the same size, the mtime put back) would pass its edit into the next check.
 *
 * A real race needs the check to rewrite the file within the wall-clock second of the preparation (its ctime, which
 * no process can set, must match the recorded one). The test makes that exact instead of waiting for it: a real
 * hostile check rewrites `src/a.js` (same size, same inode); then the test sets the file's mtime with `utimes` to a
 * second T ten seconds back, and makes the verifier's saved copy say what a same-second race leaves it saying: the
 * entry's ctime is the file's ctime, its mtime is T, and the index was written at T + 0.5 s (the copy's recorded
 * times, which the verifier puts back with `utimes`). The saved copy lives only in the verifier's memory (no check can
 * reach it), so the test reaches it there. With the recorded times put back, the entry is racy, git compares
 * `src/a.js` by content and restores it; with the index's mtime "now" (0926349 reverted) it is trusted by stat and the
 * next check sees the hostile bytes.
 */
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GitVerifier } from "../../../src/adapters/workspace/verify-worktrees.js";
import type { CheckCommand } from "../../../src/core/workspace/verify-port.js";
import { git, makeRepo } from "../../support/git-repo.js";

/** What the verifier keeps of a prepared slot (private state; see the file comment). */
interface SavedIndex {
  index: Buffer;
  indexTimes?: { atime: Date; mtime: Date };
}
interface VerifierInternals {
  pools: Map<string, { free: { path: string; gitDir: string; marks?: SavedIndex }[] }>;
}

/** The one free slot of the verifier's one product, with its saved index copy. */
function onlySlot(verifier: GitVerifier): { path: string; gitDir: string; marks: SavedIndex } {
  const pools = [...(verifier as unknown as VerifierInternals).pools.values()];
  expect(pools).toHaveLength(1);
  const slot = pools[0]?.free[0];
  if (!slot?.marks) throw new Error("the slot has no saved index after a preparation");
  return { path: slot.path, gitDir: slot.gitDir, marks: slot.marks };
}

/**
 * Sets the stat times of the entry `name` in an index file's bytes (version 2 or 3, SHA-1) and recomputes the
 * trailing checksum. Times are [seconds, nanoseconds].
 */
function setEntryTimes(index: Buffer, name: string, ctime: [number, number], mtime: [number, number]): Buffer {
  const out = Buffer.from(index);
  expect(out.toString("latin1", 0, 4)).toBe("DIRC");
  const version = out.readUInt32BE(4);
  expect([2, 3]).toContain(version);
  const count = out.readUInt32BE(8);
  let at = 12;
  for (let i = 0; i < count; i++) {
    const flags = out.readUInt16BE(at + 60);
    const fixed = version === 3 && (flags & 0x4000) !== 0 ? 64 : 62;
    const end = out.indexOf(0, at + fixed);
    const path = out.toString("utf8", at + fixed, end);
    if (path === name) {
      out.writeUInt32BE(ctime[0], at);
      out.writeUInt32BE(ctime[1], at + 4);
      out.writeUInt32BE(mtime[0], at + 8);
      out.writeUInt32BE(mtime[1], at + 12);
      const body = out.subarray(0, out.length - 20);
      createHash("sha1")
        .update(body)
        .digest()
        .copy(out, out.length - 20);
      return out;
    }
    at += (fixed + (end - (at + fixed)) + 8) & ~7;
  }
  throw new Error(`no index entry ${name}`);
}

/** True when git, reading `index` written at `mtime`, finds a tracked file of the slot changed (diff-files). */
function differs(slot: { path: string; gitDir: string }, index: Buffer, mtime: Date): boolean {
  const copy = join(slot.gitDir, "racy-probe-index");
  writeFileSync(copy, index);
  utimesSync(copy, mtime, mtime);
  try {
    execFileSync("git", [`--git-dir=${slot.gitDir}`, `--work-tree=${slot.path}`, "diff-files", "--quiet"], {
      env: { ...process.env, GIT_INDEX_FILE: copy, GIT_OPTIONAL_LOCKS: "0" },
      stdio: "ignore",
    });
    return false;
  } catch {
    return true;
  } finally {
    rmSync(copy, { force: true });
  }
}

const ORIGINAL = "a(1234);\n";
const HOSTILE = "X(9876);\n"; // the same size

/** Rewrites src/a.js in place: the same size, the same inode. */
const REWRITE: CheckCommand = { name: "rewrite", run: `printf '${HOSTILE.trim()}\\n' > src/a.js`, timeoutMs: 60_000 };
/** Green only when src/a.js holds the candidate's bytes and git sees no change. */
const SAME: CheckCommand = {
  name: "same-as-candidate",
  run: `test "$(cat src/a.js)" = '${ORIGINAL.trim()}' && git diff --quiet`,
  timeoutMs: 60_000,
};

describe("GitVerifier: a check's same-second rewrite of a tracked file (racy git)", () => {
  it("is undone because the restored index keeps the mtime git wrote it with", async () => {
    const repo = makeRepo({ "src/a.js": ORIGINAL, "src/b.js": "b();\n", "README.md": "# app\n" });
    const commit = git(repo, "rev-parse", "HEAD");
    const verifier = new GitVerifier();
    const check = (commands: CheckCommand[]) =>
      verifier.run({
        cwd: repo,
        productId: "prd_racy",
        commit,
        commands,
        env: {},
        parallel: 1,
        signal: new AbortController().signal,
      });

    // 1. A hostile check rewrites src/a.js in place (same size, same inode).
    const one = await check([REWRITE]);
    expect(one?.ok).toBe(true);
    const slot = onlySlot(verifier);
    const file = join(slot.path, "src/a.js");
    expect(readFileSync(file, "utf8")).toBe(HOSTILE);

    // 2. What a rewrite in the preparation's own second leaves: the file's ctime is the recorded one, its mtime was
    //    put back to the recorded one (second T), and the index was written in that second, after the file.
    // (utimes sets the ctime too: it is read after it.)
    const t = Math.floor(Date.now() / 1000) - 10;
    utimesSync(file, t, t);
    const { ctimeNs } = statSync(file, { bigint: true });
    const ctime: [number, number] = [Number(ctimeNs / 1_000_000_000n), Number(ctimeNs % 1_000_000_000n)];
    slot.marks.index = setEntryTimes(slot.marks.index, "src/a.js", ctime, [t, 0]);
    const written = new Date(t * 1000 + 500);
    slot.marks.indexTimes = { atime: written, mtime: written };
    // The precondition, asked of git on a copy of that index: the stat data matches src/a.js in every field git
    // compares, so written "now" the index vouches for the hostile bytes, and with its recorded mtime it does not.
    expect(differs(slot, slot.marks.index, new Date())).toBe(false);
    expect(differs(slot, slot.marks.index, written)).toBe(true);

    // 3. The next check sees the candidate's bytes.
    const two = await check([SAME]);
    expect(two?.checks.map((c) => [c.name, c.ok, c.ok ? "" : c.outputTail])).toEqual([["same-as-candidate", true, ""]]);

    await verifier.release(repo, "prd_racy");
  });
});
