/**
 * The commit object of a capture (git-workspace.ts `capture`): `commit-tree` of the staged tree on the prepared base,
 * and the rule of e4d6c1a that each run's commit is new: a re-run after a rollback that writes the same tree on the
 * same base within the same second would get the very commit an earlier run made (same tree, parent, message, time),
 * so a commit some ref already points at is written again with a later time.
 *
 * Asking the refs (`for-each-ref --points-at`) is a git process per capture (issue 34); it is needed only when the
 * commit's object existed before this `commit-tree` (no ref can point at an object that did not exist). The commit's
 * id is computed beforehand from what `commit-tree` will write (tree, parent, the orchestrator's identity, the time
 * passed to it explicitly, the message) and its loose object looked for: git writes a loose object only when the
 * object is nowhere in the repository (loose, packed or in an alternate: it freshens an existing one instead,
 * `write_object_file`), so "no loose object before, one after, under the id git printed, which is the computed one"
 * proves the commit is new. Anything else (an id that differs, say because a worker set `i18n.commitEncoding`; an
 * object that was there; an object directory git was pointed away from) asks the refs as before. Never moves a ref.
 */
import { lstatSync } from "node:fs";
import { dirname, join } from "node:path";
import { nodeCrypto } from "../system/node-builtins.js";
import { ORCHESTRATOR_IDENTITY } from "./git-cli.js";
import type { WorktreeRepo, WorktreeRun } from "./worktree-git.js";

/** `+hhmm` / `-hhmm`: the local offset from UTC at `seconds` (what git writes for "now" in the local zone). */
function zone(seconds: number): string {
  const minutes = -new Date(seconds * 1000).getTimezoneOffset();
  const abs = Math.abs(minutes);
  const hhmm = `${String(Math.floor(abs / 60)).padStart(2, "0")}${String(abs % 60).padStart(2, "0")}`;
  return `${minutes < 0 ? "-" : "+"}${hhmm}`;
}

/** The id git gives the commit object `commit-tree` writes with these fields, or `null` for an unknown hash. */
function commitId(tree: string, parent: string, date: string, message: string): string | null {
  const algorithm = /^[0-9a-f]{40}$/.test(tree) ? "sha1" : /^[0-9a-f]{64}$/.test(tree) ? "sha256" : null;
  if (algorithm === null) return null;
  const who = `${ORCHESTRATOR_IDENTITY.name} <${ORCHESTRATOR_IDENTITY.email}> ${date}`;
  const body = Buffer.concat([
    Buffer.from(`tree ${tree}\nparent ${parent}\nauthor ${who}\ncommitter ${who}\n\n`, "utf8"),
    Buffer.from(message, "utf8"),
  ]);
  const hash = nodeCrypto().createHash(algorithm);
  hash.update(`commit ${body.length}\0`);
  hash.update(body);
  return hash.digest("hex");
}

async function isFile(path: string): Promise<boolean | null> {
  try {
    return lstatSync(path).isFile();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? false : null;
  }
}

/**
 * Writes the capture's commit of `tree` on `base` with `message` (see the file comment) and returns it, with
 * `fresh: true` when its object provably did not exist before. `objects` is the repository's object directory.
 * Throws when git fails.
 */
export async function captureCommit(
  run: WorktreeRun,
  repo: WorktreeRepo,
  tree: string,
  base: string,
  message: string,
): Promise<{ commit: string; fresh: boolean }> {
  const commitTree = async (date: string) =>
    (
      await run(["commit-tree", tree, "-p", base, "-F", "-"], message, {
        GIT_AUTHOR_DATE: date,
        GIT_COMMITTER_DATE: date,
      })
    ).trim();
  const now = Math.floor(Date.now() / 1000);
  const date = `${now} ${zone(now)}`;
  const expected = commitId(tree, base, date, message);
  const objects = join(dirname(dirname(repo.gitDir)), "objects");
  const loose = expected === null ? null : join(objects, expected.slice(0, 2), expected.slice(2));
  const before = loose === null ? null : await isFile(loose);
  let commit = await commitTree(date);
  if (before === false && commit === expected && loose !== null && (await isFile(loose)) === true)
    return { commit, fresh: true };
  const known = async (id: string) => (await run(["for-each-ref", "--count=1", "--points-at", id])).trim() !== "";
  for (let later = 1; later <= 60 && (await known(commit)); later++) {
    const date = `${Math.floor(Date.now() / 1000) + later} +0000`;
    commit = await commitTree(date);
  }
  return { commit, fresh: false };
}
