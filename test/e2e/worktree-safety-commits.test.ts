/**
 * Work is captured against the base the orchestrator prepared, and every branch move is verified against the ref
 * itself (issue 26, cases 4 and 5; DESIGN.md guarantee 16), over real stdio with a real git repository and the
 * scripted ACP worker running its own git:
 * 4. a worker that commits itself (and leaves nothing, or something, uncommitted) gets all of it integrated, as one task
 *    commit on top of the base (squash), nothing dropped;
 * 5. a worker that moves `refs/heads/acp/<productId>` with `git update-ref` stops the product with a recovery naming
 *    the expected and the found head; nothing is overwritten, nothing is reported integrated, no attempt is spent,
 *    and once the branch is put back, resume completes the product.
 * In each the user's HEAD, branches, index, working tree and in-progress operation are byte-for-byte unchanged.
 */
import { describe, expect, it } from "vitest";
import { git, makeRepo } from "../support/git-repo.js";
import {
  confirmAndSettle,
  expectAlive,
  GIVE_UP_LEADER,
  planProduct,
  scriptedServer,
  settledPhase,
  task,
  userState,
} from "../support/worktree-safety.js";

interface Status {
  phase: string;
  recovery?: { cause: string; resumable: boolean; remediation: string };
  integration?: { state: string; head: string; merged: string[] };
  tasks: {
    taskId: string;
    status: string;
    attempts: number;
    error?: string;
    workspace?: { baseCommit: string; commit?: string; changedFiles?: string[] };
  }[];
}

const WHO = "-c user.name=Worker -c user.email=worker@example.com";
const sh = (script: string) => ({ exec: { command: "sh", args: ["-c", script] } });

describe("the worker's own git cannot make the orchestrator lose or misreport work", () => {
  it("case 4: a worker's own commits are integrated with its loose edits, squashed onto the base", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const before = userState(repo);
    const s = await scriptedServer({
      leader: GIVE_UP_LEADER,
      worker: {
        tasks: {
          // Two commits of its own and nothing uncommitted: the case that was `completed` with `changedFiles: []`.
          a: {
            actions: [
              sh(`echo one > one.txt && git add one.txt && git ${WHO} commit -qm "worker 1"`),
              sh(`echo two > two.txt && git add two.txt && git ${WHO} commit -qm "worker 2"`),
            ],
          },
          // A commit of its own, then a loose edit and a loose new file on top.
          b: {
            actions: [
              sh(`echo three > three.txt && git add three.txt && git ${WHO} commit -qm "worker 3"`),
              sh("echo changed > one.txt && echo loose > loose.txt"),
            ],
          },
        },
      },
    });
    try {
      const productId = await planProduct(s.server, repo);
      expect(await confirmAndSettle(s.server, productId, [task("a"), task("b", ["a"])])).toBe("completed");
      const status = await s.server.request<Status>("product.status", { productId });
      const [a, b] = ["a", "b"].map((id) => status.tasks.find((t) => t.taskId === id));
      expect(a?.workspace?.changedFiles).toEqual(["one.txt", "two.txt"]);
      expect(b?.workspace?.changedFiles).toEqual(["loose.txt", "one.txt", "three.txt"]);
      // One task commit per attempt, whose only parent is the base the orchestrator prepared (squash).
      for (const t of [a, b]) {
        expect(git(repo, "rev-list", "--parents", "-n", "1", t?.workspace?.commit ?? "")).toBe(
          `${t?.workspace?.commit} ${t?.workspace?.baseCommit}`,
        );
      }
      const branch = `acp/${productId}`;
      expect(status.integration?.state).toBe("integrated");
      expect(git(repo, "rev-parse", branch)).toBe(status.integration?.head);
      expect(git(repo, "show", `${branch}:one.txt`)).toBe("changed");
      expect(git(repo, "show", `${branch}:two.txt`)).toBe("two");
      expect(git(repo, "show", `${branch}:three.txt`)).toBe("three");
      expect(git(repo, "show", `${branch}:loose.txt`)).toBe("loose");
      // The worker's own commits are not on the branch (their content is, in the task commits).
      expect(git(repo, "log", "--format=%s", branch)).not.toMatch(/worker \d/);
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);

  it("case 5: a branch moved by a worker pauses the product naming both heads; resume after it is put back", async () => {
    const repo = makeRepo({ "README.md": "# Project\n", ".gitignore": "*.pid\n" });
    const before = userState(repo);
    const s = await scriptedServer({ leader: GIVE_UP_LEADER });
    try {
      const productId = await planProduct(s.server, repo);
      const branch = `refs/heads/acp/${productId}`;
      s.setScript({
        leader: GIVE_UP_LEADER,
        worker: {
          tasks: {
            a: {
              actions: [
                sh(
                  `echo a > a.txt && rogue=$(git ${WHO} commit-tree "HEAD^{tree}" -p HEAD -m rogue) && git update-ref ${branch} "$rogue"`,
                ),
              ],
            },
            b: { actions: [sh("echo b > b.txt")] },
          },
        },
      });
      const expected = git(repo, "rev-parse", "HEAD");
      expect(await confirmAndSettle(s.server, productId, [task("a"), task("b", ["a"])])).toBe("paused");
      const found = git(repo, "rev-parse", branch);
      expect(found).not.toBe(expected);
      expect(git(repo, "log", "-1", "--format=%s", found)).toBe("rogue");
      const status = await s.server.request<Status>("product.status", { productId });
      expect(status.recovery?.cause).toContain(`expected head ${expected}, found ${found}`);
      expect(status.recovery?.resumable).toBe(true);
      expect(status.integration?.state).not.toBe("integrated");
      expect(status.integration?.head).toBe(expected);
      expect(status.integration?.merged).toEqual([]);
      // No attempt spent: the task waits to run again, it did not fail.
      const a = status.tasks.find((t) => t.taskId === "a");
      expect(a?.status).toBe("pending");
      expect(status.tasks.find((t) => t.taskId === "b")?.status).toBe("pending");

      // The user puts the branch back; the worker behaves this time; resume completes the product.
      git(repo, "update-ref", branch, expected, found);
      s.setScript({
        leader: GIVE_UP_LEADER,
        worker: { tasks: { a: { actions: [sh("echo a > a.txt")] }, b: { actions: [sh("echo b > b.txt")] } } },
      });
      await s.server.request("product.resume", { productId });
      expect(await settledPhase(s.server, productId)).toBe("completed");
      const done = await s.server.request<Status>("product.status", { productId });
      expect(done.integration?.state).toBe("integrated");
      expect(done.integration?.merged).toEqual(["a", "b"]);
      expect(git(repo, "rev-parse", branch)).toBe(done.integration?.head);
      expect(git(repo, "show", `${branch}:a.txt`)).toBe("a");
      expect(git(repo, "show", `${branch}:b.txt`)).toBe("b");
      expect(userState(repo)).toEqual(before);
      expect(await expectAlive(s.server)).toBe(true);
    } finally {
      await s.server.close();
    }
  }, 180_000);
});
