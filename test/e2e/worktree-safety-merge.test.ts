/**
 * `integration.mode: merge` never touches the user's own operation, and names every conflicting file (issue 26, case
 * 7; DESIGN.md guarantee 16), over real stdio with a real git repository and the scripted ACP worker:
 * - the user is in the middle of their own merge (conflict resolved in the working tree and staged, not committed) as
 *   the product ends: the user's checkout is left exactly as it is (MERGE_HEAD, index, resolution) and the
 *   integration is `deferred` with the reason; the result is on `acp/<productId>`;
 * - the user committed a conflicting change to `main` while the product ran: the end merge is a `conflict` that names
 *   the file, and the user's checkout is unchanged.
 */
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, makeRepo, writeRepoFiles } from "../support/git-repo.js";
import { tempDir } from "../support/server-process.js";
import {
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
  integration?: {
    mode: string;
    state: string;
    head: string;
    reason?: string;
    targetBranch?: string;
    conflict?: { files: string[] };
  };
}

const MERGE = { integration: { mode: "merge" } };

describe("merge mode leaves the user's own git work alone", () => {
  it("case 7: a merge of the user's in progress is not aborted: the integration is deferred, nothing touched", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", "conflict.txt": "base\n", ".gitignore": "*.pid\n" });
    git(repo, "checkout", "-q", "-b", "other");
    writeRepoFiles(repo, { "conflict.txt": "other\n" });
    git(repo, "commit", "-qam", "other side");
    git(repo, "checkout", "-q", "main");
    writeRepoFiles(repo, { "conflict.txt": "main\n" });
    git(repo, "commit", "-qam", "main side");
    // The user's own merge conflicts; they resolve it in the working tree and stage it, but do not commit yet.
    expect(() => execFileSync("git", ["merge", "-q", "other"], { cwd: repo, stdio: "ignore" })).toThrow();
    writeRepoFiles(repo, { "conflict.txt": "resolved by the user\n" });
    git(repo, "add", "conflict.txt");
    expect(existsSync(join(repo, ".git", "MERGE_HEAD"))).toBe(true);
    const before = userState(repo);
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: { tasks: { a: { actions: [{ write: { path: "task.txt", content: "task\n" } }] } } },
    });
    try {
      const productId = await planProduct(s.server, repo, MERGE);
      expect(await confirmAndSettle(s.server, productId, [task("a")])).toBe("completed");
      const status = await s.server.request<Status>("product.status", { productId });
      expect(status.integration).toMatchObject({ mode: "merge", targetBranch: "main", state: "deferred" });
      expect(status.integration?.reason).toBe(
        "main was not changed: A merge is in progress in the checkout; the orchestrator leaves it alone.",
      );
      expect(git(repo, "show", `acp/${productId}:task.txt`)).toBe("task");
      // The user's merge is exactly where they left it: MERGE_HEAD, their staged resolution, HEAD and branches.
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
      // …and they can still conclude it.
      git(repo, "commit", "-qm", "the user's merge");
      expect(git(repo, "show", "HEAD:conflict.txt")).toBe("resolved by the user");
    } finally {
      await s.server.close();
    }
  }, 180_000);

  it("case 7: a conflict with what the user committed meanwhile names the file and changes nothing", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", "shared.txt": "base\n", ".gitignore": "*.pid\n" });
    const go = join(tempDir("acp-orch-go-"), "go");
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          a: {
            actions: [
              { waitForFile: go },
              { write: { path: "shared.txt", content: "the worker's\n" } },
              { write: { path: "other.txt", content: "other\n" } },
            ],
          },
        },
      },
    });
    try {
      const productId = await planProduct(s.server, repo, MERGE);
      const running = s.server.waitFor(
        (n) => n.method === "product.taskStatus" && n.params.productId === productId && n.params.status === "running",
        60_000,
      );
      const settled = confirmAndSettle(s.server, productId, [task("a")]);
      await running;
      // While the task runs, the user commits their own change to the same line.
      writeRepoFiles(repo, { "shared.txt": "the user's\n" });
      git(repo, "commit", "-qam", "user change");
      const before = userState(repo);
      writeFileSync(go, "");
      expect(await settled).toBe("completed");
      const status = await s.server.request<Status>("product.status", { productId });
      expect(status.integration?.state).toBe("conflict");
      expect(status.integration?.conflict?.files).toEqual(["shared.txt"]);
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);
});
