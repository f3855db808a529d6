import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  FS_ERROR_CODES,
  isInside,
  sliceLines,
  WorkspaceFs,
  WorkspaceFsError,
} from "../../../src/adapters/agents/workspace-fs.js";

let base: string;
let root: string;
let fs: WorkspaceFs;

beforeEach(async () => {
  base = realpathSync(await mkdtemp(join(tmpdir(), "workspace-fs-")));
  root = join(base, "ws");
  mkdirSync(join(root, "src"), { recursive: true });
  writeFileSync(join(root, "src", "a.txt"), "one\ntwo\nthree\n");
  writeFileSync(join(base, "outside.txt"), "outside\n");
  mkdirSync(join(base, "away"));
  writeFileSync(join(base, "away", "secret.txt"), "secret\n");
  fs = new WorkspaceFs(root);
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

/** The WorkspaceFsError `p` rejects with (fails the test if it resolves or throws something else). */
async function refusal(p: Promise<unknown>): Promise<WorkspaceFsError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkspaceFsError);
  return error as WorkspaceFsError;
}

describe("isInside and sliceLines", () => {
  it("treats the root and its descendants as inside, and ../ or a sibling prefix as outside", () => {
    expect(isInside("/ws", "/ws")).toBe(true);
    expect(isInside("/ws", "/ws/a/b")).toBe(true);
    expect(isInside("/ws", "/ws/..foo")).toBe(true);
    expect(isInside("/ws", "/ws-other/a")).toBe(false);
    expect(isInside("/ws", "/")).toBe(false);
    expect(isInside("/ws/a", "/ws")).toBe(false);
  });

  it("slices 1-based lines with a limit, keeping line endings", () => {
    const text = "a\nb\nc\n";
    expect(sliceLines(text)).toBe(text);
    expect(sliceLines(text, 2)).toBe("b\nc\n");
    expect(sliceLines(text, 2, 1)).toBe("b\n");
    expect(sliceLines(text, 0, 1)).toBe("a\n");
    expect(sliceLines(text, null, 2)).toBe("a\nb\n");
    expect(sliceLines(text, 9)).toBe("");
    expect(sliceLines(text, 1, 0)).toBe("");
  });
});

describe("WorkspaceFs reads", () => {
  it("reads a file inside the workspace, whole or by line and limit", async () => {
    expect(await fs.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
    expect(await fs.readTextFile(join(root, "src", "a.txt"), { line: 2, limit: 1 })).toBe("two\n");
    expect(await fs.readTextFile(`${root}/src/../src/a.txt`)).toBe("one\ntwo\nthree\n");
  });

  it("refuses /etc/passwd, relative paths and .. escapes with -32602", async () => {
    for (const [path, reason] of [
      ["/etc/passwd", "outside_workspace"],
      ["src/a.txt", "relative_path"],
      ["../outside.txt", "relative_path"],
      [`${root}/../outside.txt`, "outside_workspace"],
      [`${root}/src/../../outside.txt`, "outside_workspace"],
      ["", "invalid_path"],
      [`${root}/a\0b`, "invalid_path"],
    ] as const) {
      const error = await refusal(fs.readTextFile(path));
      expect(error.code, path).toBe(FS_ERROR_CODES.refused);
      expect(error.data, path).toEqual({ path, reason, workspace: root });
    }
    expect((await refusal(fs.readTextFile("/etc/passwd"))).message).toBe(
      `Refused "/etc/passwd": it is outside the workspace ${root}.`,
    );
  });

  it("refuses symlinks that leave the workspace (directory or file) and dangling ones, but follows those that stay", async () => {
    symlinkSync(join(base, "away"), join(root, "link"));
    symlinkSync(join(base, "outside.txt"), join(root, "out.txt"));
    symlinkSync(join(base, "nowhere.txt"), join(root, "dangling.txt"));
    symlinkSync(join(root, "src"), join(root, "alias"));
    expect((await refusal(fs.readTextFile(join(root, "link", "secret.txt")))).data.reason).toBe("symlink_escape");
    expect((await refusal(fs.readTextFile(join(root, "out.txt")))).data.reason).toBe("symlink_escape");
    expect((await refusal(fs.readTextFile(join(root, "dangling.txt")))).data.reason).toBe("dangling_symlink");
    expect(await fs.readTextFile(join(root, "alias", "a.txt"))).toBe("one\ntwo\nthree\n");
  });

  it("answers a missing file with -32002, a directory or an oversized file with -32602", async () => {
    const missing = await refusal(fs.readTextFile(join(root, "nope.txt")));
    expect(missing.code).toBe(FS_ERROR_CODES.notFound);
    expect(missing.data.reason).toBe("not_found");
    expect((await refusal(fs.readTextFile(join(root, "src")))).data.reason).toBe("not_a_file");
    const small = new WorkspaceFs(root, { maxReadBytes: 4 });
    expect((await refusal(small.readTextFile(join(root, "src", "a.txt")))).data.reason).toBe("too_large");
  });

  it("serves a workspace reached through a symlinked root", async () => {
    symlinkSync(root, join(base, "ws-link"));
    const viaLink = new WorkspaceFs(join(base, "ws-link"));
    expect(await viaLink.readTextFile(join(base, "ws-link", "src", "a.txt"))).toBe("one\ntwo\nthree\n");
    expect(await viaLink.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
    expect((await refusal(viaLink.readTextFile(join(base, "outside.txt")))).data.reason).toBe("outside_workspace");
  });
});

describe("WorkspaceFs writes", () => {
  it("creates and replaces files inside the workspace, creating parent folders", async () => {
    await fs.writeTextFile(join(root, "docs", "deep", "new.md"), "# New\n");
    expect(readFileSync(join(root, "docs", "deep", "new.md"), "utf8")).toBe("# New\n");
    await fs.writeTextFile(join(root, "src", "a.txt"), "replaced");
    expect(readFileSync(join(root, "src", "a.txt"), "utf8")).toBe("replaced");
  });

  it("refuses ../outside, absolute escapes and symlink escapes, and writes nothing", async () => {
    symlinkSync(join(base, "away"), join(root, "link"));
    symlinkSync(join(base, "outside.txt"), join(root, "out.txt"));
    symlinkSync(join(base, "created-by-link.txt"), join(root, "dangling.txt"));
    const attempts: [string, string][] = [
      ["../outside.txt", "relative_path"],
      [`${root}/../outside.txt`, "outside_workspace"],
      [join(base, "new-outside.txt"), "outside_workspace"],
      [join(root, "link", "pwned.txt"), "symlink_escape"],
      [join(root, "link", "sub", "pwned.txt"), "symlink_escape"],
      [join(root, "out.txt"), "symlink_escape"],
      [join(root, "dangling.txt"), "dangling_symlink"],
    ];
    for (const [path, reason] of attempts) {
      const error = await refusal(fs.writeTextFile(path, "pwned"));
      expect(error.code, path).toBe(FS_ERROR_CODES.refused);
      expect(error.data.reason, path).toBe(reason);
    }
    expect(readFileSync(join(base, "outside.txt"), "utf8")).toBe("outside\n");
    expect(existsSync(join(base, "new-outside.txt"))).toBe(false);
    expect(existsSync(join(base, "away", "pwned.txt"))).toBe(false);
    expect(existsSync(join(base, "away", "sub"))).toBe(false);
    expect(existsSync(join(base, "created-by-link.txt"))).toBe(false);
  });

  it("refuses to write over a directory", async () => {
    expect((await refusal(fs.writeTextFile(join(root, "src"), "x"))).data.reason).toBe("not_a_file");
  });

  it("refuses FIFOs at once, reading and writing, and keeps answering other requests (issue 11)", async () => {
    const fifos = [1, 2, 3, 4].map((i) => join(root, `pipe-${i}`));
    for (const fifo of fifos) execFileSync("mkfifo", [fifo]);
    // Eight requests on FIFOs: before the fix each open blocked a thread-pool thread for good (4 of them = all).
    const answers = await Promise.all(
      fifos.flatMap((fifo) => [refusal(fs.readTextFile(fifo)), refusal(fs.writeTextFile(fifo, "x"))]),
    );
    expect(answers.map((e) => [e.code, e.data.reason])).toEqual(
      fifos.flatMap(() => Array(2).fill([-32602, "not_a_file"])),
    );
    expect(answers[0]?.message).toMatch(/is not a regular file/);
    // The pool is free: a normal request still answers.
    expect(await fs.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
  });

  it("requires an absolute root", () => {
    expect(() => new WorkspaceFs("relative/root")).toThrow(RangeError);
  });
});

describe("WorkspaceFs additional roots (issue 31: a session's additionalDirectories)", () => {
  it("serves reads and writes inside an additional root with the workspace's rules", async () => {
    const extra = join(base, "extra");
    mkdirSync(join(extra, "docs"), { recursive: true });
    writeFileSync(join(extra, "docs", "spec.md"), "spec\n");
    const both = new WorkspaceFs(root, { additionalRoots: [extra] });
    expect(both.roots).toEqual([root, extra]);
    expect(await both.readTextFile(join(extra, "docs", "spec.md"))).toBe("spec\n");
    await both.writeTextFile(join(extra, "new", "out.txt"), "written");
    expect(readFileSync(join(extra, "new", "out.txt"), "utf8")).toBe("written");
    // The workspace is still served; the rest of the disk is not, nor a `..` escape out of the additional root.
    expect(await both.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
    const outside = await refusal(both.readTextFile(join(base, "outside.txt")));
    expect(outside.data.reason).toBe("outside_workspace");
    expect(outside.message).toContain(`and the additional directories ${extra}`);
    const escape = await refusal(both.writeTextFile(`${extra}/../outside.txt`, "x"));
    expect(escape.data.reason).toBe("outside_workspace");
    expect(readFileSync(join(base, "outside.txt"), "utf8")).toBe("outside\n");
    // Without the root the same path is outside.
    expect((await refusal(fs.readTextFile(join(extra, "docs", "spec.md")))).data.reason).toBe("outside_workspace");
  });

  it("refuses symlinks that leave an additional root, even into the workspace, and its .git", async () => {
    const extra = join(base, "extra");
    mkdirSync(extra);
    execFileSync("git", ["init", "-q", extra]);
    symlinkSync(join(base, "away"), join(extra, "away-link"));
    symlinkSync(join(root, "src"), join(extra, "ws-link"));
    const both = new WorkspaceFs(root, { additionalRoots: [extra] });
    const away = await refusal(both.readTextFile(join(extra, "away-link", "secret.txt")));
    expect(away.data.reason).toBe("symlink_escape");
    const intoWorkspace = await refusal(both.writeTextFile(join(extra, "ws-link", "a.txt"), "x"));
    expect(intoWorkspace.data.reason).toBe("symlink_escape");
    expect(readFileSync(join(root, "src", "a.txt"), "utf8")).toBe("one\ntwo\nthree\n");
    const git = await refusal(both.readTextFile(join(extra, ".git", "HEAD")));
    expect(git.data.reason).toBe("git_dir");
    expect((await refusal(both.writeTextFile(join(extra, ".GIT", "config"), "x"))).data.reason).toBe("git_dir");
  });

  it("never serves an additional root that is a .git folder, nor one that does not resolve", async () => {
    const repo = join(base, "repo");
    execFileSync("git", ["init", "-q", repo]);
    const both = new WorkspaceFs(root, { additionalRoots: [join(repo, ".git"), join(base, "gone")] });
    const refused = await refusal(both.readTextFile(join(repo, ".git", "HEAD")));
    expect(refused.data.reason).toBe("outside_workspace");
    expect((await refusal(both.readTextFile(join(base, "gone", "x")))).data.reason).toBe("outside_workspace");
    expect(await both.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
    expect(() => new WorkspaceFs(root, { additionalRoots: ["relative"] })).toThrow(RangeError);
  });

  it("never opens the user's checkout through an additional root that holds it, lies in it or aliases it", async () => {
    // Found by review: with the product's checkout `proj` (an isolated attempt works in its own worktree `ws`), an
    // additional directory `proj/src`, a parent of `proj` or a symlink to it let a worker write into the checkout.
    const proj = join(base, "proj");
    mkdirSync(join(proj, "src"), { recursive: true });
    writeFileSync(join(proj, "src", "main.ts"), "user's\n");
    symlinkSync(proj, join(base, "proj-link"));
    mkdirSync(join(base, "docs"));
    const guarded = new WorkspaceFs(root, {
      additionalRoots: [join(proj, "src"), base, join(base, "proj-link")],
      protectedRoots: [proj],
    });
    for (const target of [join(proj, "src", "main.ts"), join(base, "proj-link", "src", "main.ts")]) {
      const refused = await refusal(guarded.writeTextFile(target, "worker's"));
      expect(refused.data.reason).toBe("outside_workspace");
      expect(refused.message).toContain("user's checkout");
    }
    expect((await refusal(guarded.readTextFile(join(proj, "src", "main.ts")))).data.reason).toBe("outside_workspace");
    expect(readFileSync(join(proj, "src", "main.ts"), "utf8")).toBe("user's\n");
    // The rest of an additional root that holds the checkout is served; so is the workspace itself.
    await guarded.writeTextFile(join(base, "docs", "note.md"), "ok");
    expect(readFileSync(join(base, "docs", "note.md"), "utf8")).toBe("ok");
    expect(await guarded.readTextFile(join(root, "src", "a.txt"))).toBe("one\ntwo\nthree\n");
  });
});
