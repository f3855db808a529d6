import { describe, expect, it } from "vitest";
import { Plan as PlanSchema } from "../../../protocol/common.js";
import type { Plan, Task, TaskState, TaskStatus } from "../../../protocol/common.js";
import { validatePlanGraph } from "../../../src/core/dag/graph.js";
import { applyMutations } from "../../../src/core/dag/mutations.js";
import { HeuristicLeader, makeTitle, splitGoal } from "../../../src/core/leader/heuristic-leader.js";
import type { AgentInfo, DialogueEntry, DraftPlan, PlanRequest } from "../../../src/core/ports.js";
import { DEFAULT_GOAL } from "../../../src/demo.js";

const leader = new HeuristicLeader();
const signal = new AbortController().signal;
const ROSTER: AgentInfo[] = [
  { agentId: "claude", name: "Claude", role: "coder", strengths: [] },
  { agentId: "gemini", name: "Gemini", role: "reviewer", strengths: [] },
];

function request(
  goal: string,
  revisions: string[] = [],
  roster: AgentInfo[] = ROSTER,
): PlanRequest & { chunks: string[] } {
  const dialogue: DialogueEntry[] = [{ role: "user", text: goal, at: "2026-01-01T00:00:00Z" }];
  for (const text of revisions) {
    dialogue.push({ role: "leader", text: "Here is the plan.", at: "2026-01-01T00:00:01Z" });
    dialogue.push({ role: "user", text, at: "2026-01-01T00:00:02Z" });
  }
  const chunks: string[] = [];
  return { productId: "prd_1", goal, cwd: "/work", roster, dialogue, signal, onText: (t) => chunks.push(t), chunks };
}

async function planOf(
  goal: string,
  revisions: string[] = [],
  roster: AgentInfo[] = ROSTER,
): Promise<DraftPlan & { message: string }> {
  const result = await leader.plan(request(goal, revisions, roster));
  if (result.kind !== "plan") throw new Error("expected a plan");
  return { ...result.plan, message: result.message };
}

/** Asserts the draft is a valid wire plan and a valid DAG, and returns `[id, title, deps]` rows. */
function rows(plan: DraftPlan): [string, string, string[]][] {
  expect(PlanSchema.safeParse({ ...plan, productId: "prd_1", version: 1 }).success).toBe(true);
  expect(validatePlanGraph(plan.instances, plan.tasks)).toEqual({ ok: true });
  return plan.tasks.map((t) => [t.taskId, t.title, t.dependsOn]);
}

describe("HeuristicLeader.plan: goal → tasks", () => {
  it("turns a one-line goal into analyse → implement → review, round-robin over the roster", async () => {
    const plan = await planOf("Fix the login bug");
    expect(rows(plan)).toEqual([
      ["t1", "Analyse: Fix the login bug", []],
      ["t2", "Implement: Fix the login bug", ["t1"]],
      ["t3", "Review: Fix the login bug", ["t2"]],
    ]);
    // Two agents, a chain of three tasks: round-robin over the agents; a chain needs no second instance (issue 28).
    expect(plan.tasks.map((t) => t.instanceId)).toEqual(["i1", "i2", "i1"]);
    expect(plan.instances).toEqual([
      { instanceId: "i1", agentId: "claude", role: "coder", name: "Claude" },
      { instanceId: "i2", agentId: "gemini", role: "reviewer", name: "Gemini" },
    ]);
    expect(plan.message).toContain(
      "t1. Analyse: Fix the login bug — Claude, coder [no agent's strengths match; round-robin]",
    );
    expect(plan.name).toBe("Fix the login bug");
    expect(plan.tasks[1]?.description).toContain("Fix the login bug");
  });

  it("reads bullets with 'then' and 'finally' as dependencies, other bullets as independent", async () => {
    const plan = await planOf(
      "Build a todo app:\n- design the data model\n- then implement the REST API\n- write the React UI\n- finally, write end-to-end tests",
    );
    expect(rows(plan)).toEqual([
      ["t1", "Design the data model", []],
      ["t2", "Implement the REST API", ["t1"]],
      ["t3", "Write the React UI", []],
      ["t4", "Write end-to-end tests", ["t1", "t2", "t3"]],
    ]);
    expect(plan.name).toBe("Build a todo app");
    expect(plan.tasks[0]?.description).toMatch(/^design the data model\n\nOverall goal:\nBuild a todo app:/);
  });

  it("keeps a numbered list independent unless an item uses ordering words", async () => {
    const plain = await planOf("1. Set up the repo\n2. Write the parser\n3. Write the docs");
    expect(rows(plain).map((r) => r[2])).toEqual([[], [], []]);
    const ordered = await planOf(
      "1) Set up the repo\n2) Write the parser\n3) After step 2, write the tests\n4) Lastly, deploy",
    );
    expect(rows(ordered)).toEqual([
      ["t1", "Set up the repo", []],
      ["t2", "Write the parser", []],
      ["t3", "Write the tests", ["t2"]],
      ["t4", "Deploy", ["t1", "t2", "t3"]],
    ]);
  });

  it("understands 'Step N:' items, nested bullets and wrapped lines", async () => {
    const plan = await planOf("Step 1: collect the logs\n  - from prod\nand staging\nStep 2: then find the cause");
    expect(rows(plan)).toEqual([
      ["t1", "Collect the logs; from prod and staging", []],
      ["t2", "Find the cause", ["t1"]],
    ]);
  });

  it("splits prose into sentences and ordering clauses; 'meanwhile' shares the previous item's dependencies", async () => {
    const plan = await planOf(
      "Analyse the codebase. Then refactor the parser, and then add tests. Meanwhile update the docs. Finally, release version 2.0.",
    );
    expect(rows(plan)).toEqual([
      ["t1", "Analyse the codebase", []],
      ["t2", "Refactor the parser", ["t1"]],
      ["t3", "Add tests", ["t2"]],
      ["t4", "Update the docs", ["t2"]],
      ["t5", "Release version 2.0", ["t1", "t2", "t3", "t4"]],
    ]);
    // Its first sentence is its first task: the name sums up the tasks instead (issue 28).
    expect(plan.name).toBe("Codebase, parser, tests, docs and version 2.0");
  });

  it("matches 'once the X is done' and 'based on X' to the item they name", async () => {
    const plan = await planOf(
      "Write the API spec; set up CI; once the spec is done, implement the server; build the client based on the spec",
      [],
      [],
    );
    expect(rows(plan)).toEqual([
      ["t1", "Write the API spec", []],
      ["t2", "Set up CI", []],
      ["t3", "Implement the server", ["t1"]],
      ["t4", "Build the client based on the spec", ["t1"]],
    ]);
  });

  it("uses a single leader instance when the roster is empty", async () => {
    const plan = await planOf("- a thing\n- another thing", [], []);
    expect(plan.instances).toEqual([{ instanceId: "leader", agentId: "leader", role: "leader" }]);
    expect(plan.tasks.every((t) => t.instanceId === "leader")).toBe(true);
  });

  it("creates instances only for roster agents it uses", async () => {
    const roster = [...ROSTER, { agentId: "codex", name: "Codex", role: "tester", strengths: [] }];
    const plan = await planOf("- one\n- two", [], roster);
    expect(plan.instances.map((i) => i.agentId)).toEqual(["claude", "gemini"]);
  });

  it("handles Chinese ordering words", async () => {
    const plan = await planOf("重构解析器。然后添加测试。最后发布。");
    expect(rows(plan)).toEqual([
      ["t1", "重构解析器", []],
      ["t2", "添加测试", ["t1"]],
      ["t3", "发布", ["t1", "t2"]],
    ]);
  });

  it("makes a plan from an empty-ish goal", async () => {
    for (const goal of ["", "   ", "-", "...", "\n\n*\n"]) {
      const plan = await planOf(goal);
      expect(rows(plan).length).toBeGreaterThanOrEqual(1);
      expect(plan.name).toBe("Untitled goal");
    }
  });

  it("groups a very long list into at most 40 tasks, quickly", async () => {
    const goal = Array.from(
      { length: 5_000 },
      (_, i) => `- ${i % 7 === 0 ? "then " : ""}item number ${i} ${"x".repeat(i % 50)}`,
    ).join("\n");
    const started = performance.now();
    const plan = await planOf(`${goal}\n- finally ship it`);
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(rows(plan)).toHaveLength(40);
    expect(plan.tasks[1]?.title).toMatch(/\(\+125 more\)$/u);
    expect(plan.tasks[39]?.dependsOn).toHaveLength(39);
  });

  it("streams the message in a few chunks that join to the message, and is deterministic", async () => {
    const goal = "- plan the work\n- then do the work";
    const req = request(goal, ["add a review step at the end"]);
    const first = await leader.plan(req);
    const again = await leader.plan(request(goal, ["add a review step at the end"]));
    expect(again).toEqual(first);
    expect(first.kind === "plan" && first.message).toBe(req.chunks.join(""));
    expect(req.chunks.length).toBeGreaterThanOrEqual(2);
    expect(req.chunks.length).toBeLessThanOrEqual(4);
  });

  it("rejects when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await expect(leader.plan({ ...request("x"), signal: controller.signal })).rejects.toThrow("stop");
  });
});

describe("HeuristicLeader.plan: issue 15's built-in leader (ordering, strengths, names, criteria)", () => {
  const TEAM: AgentInfo[] = [
    { agentId: "coder", name: "Coder", role: "developer", strengths: ["code", "tests", "refactoring"] },
    { agentId: "writer", name: "Writer", role: "technical writer", strengths: ["docs", "changelog", "guides"] },
  ];
  const DEMO_GOAL = [
    "- Write the changelog for version 2.0",
    "- Then update the API reference",
    "- In parallel, fix the failing login test",
    "- Then write the release notes based on the changelog",
    "- Then build the release packages",
    "- Meanwhile, refresh the screenshots",
    "- Then smoke-test the packages",
    "- Finally, publish the release",
  ].join("\n");

  it("a demo goal with 'In parallel' and 'based on' items gets the dependencies a reader would draw", async () => {
    const plan = await planOf(DEMO_GOAL, [], TEAM);
    expect(rows(plan)).toEqual([
      ["t1", "Write the changelog for version 2.0", []],
      ["t2", "Update the API reference", ["t1"]],
      // "In parallel" runs beside t2: it shares t2's dependencies instead of waiting for it.
      ["t3", "Fix the failing login test", ["t1"]],
      // "based on the changelog" names t1: the named item wins over the "Then".
      ["t4", "Write the release notes based on the changelog", ["t1"]],
      ["t5", "Build the release packages", ["t4"]],
      ["t6", "Refresh the screenshots", ["t4"]],
      // "Then" after a parallel pair waits for the whole pair.
      ["t7", "Smoke-test the packages", ["t5", "t6"]],
      ["t8", "Publish the release", ["t1", "t2", "t3", "t4", "t5", "t6", "t7"]],
    ]);
  });

  it("a 'then' after several 'in parallel' items waits for the whole group; 'independently' waits for nothing", async () => {
    const plan = await planOf(
      "- Design the schema\n- Then write the migration\n- In parallel, write the API\n- At the same time, write the UI\n" +
        "- Then run the integration tests\n- Independently, update the logo",
      [],
      [],
    );
    expect(rows(plan).map((r) => r[2])).toEqual([[], ["t1"], ["t1"], ["t1"], ["t2", "t3", "t4"], []]);
  });

  it("strengths put a docs task on the docs agent and a test task on the coder; ties go round-robin", async () => {
    const plan = await planOf(
      "- Fix the flaky tests\n- Write the docs for the new API\n- Update the changelog\n- Refactor the code of the parser\n" +
        "- Polish the logo\n- Rename the repository",
      [],
      TEAM,
    );
    const agentOf = (taskId: string): string => {
      const task = plan.tasks.find((t) => t.taskId === taskId);
      return plan.instances.find((i) => i.instanceId === task?.instanceId)?.agentId ?? "";
    };
    expect(["t1", "t2", "t3", "t4"].map(agentOf)).toEqual(["coder", "writer", "writer", "coder"]);
    // No strength matches t5 and t6: their position picks the seat round-robin over all three seats.
    expect(new Set(["t5", "t6"].map(agentOf)).size).toBe(2);
    // The built-in worker's strengths are notes and documentation: "Document …" goes to it.
    const builtin: AgentInfo = {
      agentId: "builtin",
      name: "Built-in",
      role: "worker",
      strengths: ["notes", "documentation"],
    };
    const docs = await planOf("- Fix the parser\n- Document the parser", [], [TEAM[0] as AgentInfo, builtin]);
    expect(docs.instances.find((i) => i.instanceId === docs.tasks[1]?.instanceId)?.agentId).toBe("builtin");
    // An "assign" revision still wins over strengths.
    const pinned = await planOf("- Fix the parser\n- Document the parser", ["assign task 2 to coder"], TEAM);
    expect(pinned.instances.find((i) => i.instanceId === pinned.tasks[1]?.instanceId)?.agentId).toBe("coder");
  });

  it("puts independent tasks on different instances whichever rule picked their candidates (the demo's goal)", async () => {
    // One agent whose strengths match some items and not others: the items matched and the items not matched used to
    // be counted apart, so "Describe the architecture" and "In parallel, document the public API" shared an instance
    // and the demo ran them one after the other.
    const builtin: AgentInfo = {
      agentId: "builtin",
      name: "Built-in",
      role: "worker",
      strengths: ["notes", "documentation"],
    };
    const plan = await planOf(DEFAULT_GOAL, [], [builtin]);
    const [t1, t2] = plan.tasks;
    expect(t2?.dependsOn).toEqual([]);
    expect(t1?.instanceId).not.toBe(t2?.instanceId);
    // Instances of one agent are numbered in the plan's order, whichever seats they are (no "#3" for the second).
    expect(plan.instances.map((i) => i.name)).toEqual(
      ["Built-in", "Built-in #2", "Built-in #3"].slice(0, plan.instances.length),
    );
  });

  it("names the product with a summary of the goal, not its first item; a heading line still names it", async () => {
    const plan = await planOf(DEMO_GOAL, [], TEAM);
    expect(plan.name).not.toBe("Write the changelog for version 2.0");
    expect(plan.name).toMatch(/^Changelog for version 2\.0, API reference, .* and \d more$/u);
    expect(Array.from(plan.name).length).toBeLessThanOrEqual(80);
    const short = await planOf("- Write a README\n- Then add a usage guide\n- Finally, tag v1.0", [], TEAM);
    expect(short.name).toBe("README, usage guide and v1.0");
    const headed = await planOf("Ship the release:\n- Write a README\n- Then add a usage guide", [], TEAM);
    expect(headed.name).toBe("Ship the release");
  });

  it("names a product by what sets it apart, not by its first task (issue 28: 18 fleet products had one name)", async () => {
    const lines = (n: number) => [1, 2, 3].map((k) => `Write section ${k} of product ${n}`).join("\n");
    const names = await Promise.all([1, 2].map(async (n) => (await planOf(lines(n), [], TEAM)).name));
    expect(names).toEqual([
      "Section 1 of product 1, section 2 of product 1 and section 3 of product 1",
      "Section 1 of product 2, section 2 of product 2 and section 3 of product 2",
    ]);
    // One sentence names itself; a pronoun ("review it") is no name of its own.
    expect((await planOf("Write the user guide, then review it", [], TEAM)).name).toBe(
      "Write the user guide, then review it",
    );
    expect((await planOf("Write the user guide. Then review it.", [], TEAM)).name).toBe("User guide");
    // Two joined verbs are the work, not a verb to drop ("and remove functions" read like a fragment).
    const readme = await planOf(
      "- Write the README section on installation\n- Add and remove functions\n- Add tests",
      [],
      TEAM,
    );
    expect(readme.name).toBe("README section on installation, add and remove functions and tests");
  });

  it("keeps the product's title through revisions when the request names it (issue 28: set once)", async () => {
    const goal = "- Write a README\n- Then add a usage guide";
    const first = await planOf(goal, [], TEAM);
    expect(first.name).toBe("README and usage guide");
    const renamed = await planOf(goal, ["add task: write a changelog"], TEAM);
    expect(renamed.name).toBe("README, usage guide and changelog");
    const kept = await leader.plan({ ...request(goal, ["add task: write a changelog"], TEAM), title: first.name });
    if (kept.kind !== "plan") throw new Error("expected a plan");
    expect(kept.plan.tasks).toHaveLength(3);
    expect(kept.plan.name).toBe("README and usage guide");
    expect(kept.message).toContain('Here is the plan "README and usage guide"');
  });

  it("criteria and titles lose list markers and ordering words", async () => {
    const { criteria } = await leader.deriveChecklist({
      goal: "- Write a README\n- Then write a usage guide\n- In parallel, add examples\n- Finally, review everything",
      goalRunId: "gr_1",
      cwd: "/work",
      roster: [],
      signal,
    });
    expect(criteria.map((c) => c.text)).toEqual([
      "Write a README",
      "Write a usage guide",
      "Add examples",
      "Review everything",
    ]);
    const single = await leader.deriveChecklist({
      goal: "- then fix the login bug",
      goalRunId: "gr_1",
      cwd: "/work",
      roster: [],
      signal,
    });
    expect(single.criteria.map((c) => c.text)).toEqual(["Fix the login bug"]);
    const plan = await planOf("- Write a README\n- Then write a usage guide", [], TEAM);
    expect(plan.tasks.map((t) => t.title)).toEqual(["Write a README", "Write a usage guide"]);
  });
});

describe("HeuristicLeader.plan: revision messages", () => {
  const base = "- write the parser\n- write the tests\n- write the docs";

  it("adds tasks, with 'after task N' and 'at the end'", async () => {
    const plan = await planOf(base, [
      "add a task to benchmark the parser after task 1",
      "also: publish a release at the end",
    ]);
    expect(rows(plan).slice(3)).toEqual([
      ["t4", "Benchmark the parser", ["t1"]],
      ["t5", "Publish a release", ["t1", "t2", "t3", "t4"]],
    ]);
    expect(plan.message).toContain('Added t4 "Benchmark the parser" after t1.');
  });

  it("says which task it could not find for an add (regression: the note read 'could not e.find')", async () => {
    const plan = await planOf(base, ["add a task to benchmark the parser after task 9"]);
    expect(plan.message).toContain("I could not find task 9, so it does not wait for them.");
  });

  it("removes by number or by title words, keeping the order around the removed task", async () => {
    const plan = await planOf(base, ["make 3 depend on 2", "make 2 depend on 1", "remove the tests task"]);
    expect(rows(plan)).toEqual([
      ["t1", "Write the parser", []],
      ["t2", "Write the docs", ["t1"]],
    ]);
    const two = await planOf(base, ["drop tasks 1 and 3"]);
    expect(rows(two)).toEqual([["t1", "Write the tests", []]]);
  });

  it("renames, splits, chains and un-chains", async () => {
    const renamed = await planOf(base, ["rename task 2 to Write unit tests"]);
    expect(renamed.tasks[1]?.title).toBe("Write unit tests");

    const split = await planOf(base, ["make 3 depend on 1", "split task 1 into design and build"]);
    expect(rows(split)).toEqual([
      ["t1", "Design", []],
      ["t2", "Build", ["t1"]],
      ["t3", "Write the tests", []],
      ["t4", "Write the docs", ["t2"]],
    ]);

    const chained = await planOf(base, ["please run them one after another"]);
    expect(rows(chained).map((r) => r[2])).toEqual([[], ["t1"], ["t2"]]);
    const parallel = await planOf(base, ["run them in order", "actually, all in parallel"]);
    expect(rows(parallel).map((r) => r[2])).toEqual([[], [], []]);
  });

  it("refuses a dependency that would close a cycle and says so", async () => {
    const plan = await planOf(base, ["make 2 depend on 1", "make 1 depend on 2"]);
    expect(rows(plan).map((r) => r[2])).toEqual([[], ["t1"], []]);
    expect(plan.message).toContain("which would be a cycle");
  });

  it("assigns a task to a named agent", async () => {
    const plan = await planOf(base, ["assign task 1 to the reviewer"]);
    const agentOf = (instanceId: string) => plan.instances.find((i) => i.instanceId === instanceId)?.agentId;
    expect(agentOf(plan.tasks[0]?.instanceId ?? "")).toBe("gemini");
    // The other two are independent of it and of each other: each gets an instance of its own, the least used agent
    // first (before, the second task shared the pinned task's instance and could not run beside it).
    expect(new Set(plan.tasks.map((t) => t.instanceId)).size).toBe(3);
    expect(agentOf(plan.tasks[1]?.instanceId ?? "")).toBe("claude");
  });

  it("appends anything it does not understand as a constraint to every task, and mentions it", async () => {
    const plan = await planOf(base, ["Use TypeScript strict mode everywhere.", "remove the kubernetes stuff"]);
    expect(rows(plan)).toHaveLength(3);
    for (const task of plan.tasks) {
      expect(task.description).toContain(
        "Constraints from the user:\n- Use TypeScript strict mode everywhere.\n- remove the kubernetes stuff",
      );
    }
    expect(plan.message).toContain("as a constraint to every task");
    expect(plan.message).toContain('I found no task matching "kubernetes stuff"');
  });

  it("replays revisions from the dialogue even when the goal is not recorded in it", async () => {
    const req = request(base, []);
    req.dialogue = [{ role: "user", text: "remove task 3", at: "2026-01-01T00:00:00Z" }];
    const result = await leader.plan(req);
    expect(result.kind === "plan" && result.plan.tasks).toHaveLength(2);
  });
});

describe("HeuristicLeader.plan: every plan is a valid DAG", () => {
  const goals = [
    "Fix the login bug",
    "- a\n- b\n- c",
    "1. x\n2. y after step 3\n3. z after step 2",
    "1. one\n2. two\n3. three\n4. after step 9, four\n5. after step 0, five",
    "Do A. Then B. Then C. Finally D. Meanwhile E. Also F.",
    "Once everything else is done, celebrate. Write code. Test code.",
    "* emoji 🚀 rocket\n* ünïcödé ✓\n* 日本語のタスク\n* مهمة عربية",
    "🚀".repeat(500),
    "word ".repeat(10_000),
    "- [ ] todo one\n- [x] done two\n+ plus three\n• dot four",
    "# Heading\n\nSome prose.\n\n- item\n\nMore prose after.",
    "a;b;c;d;e;f;g;h;i;j;k;l;m;n;o;p;q;r;s;t;u;v;w;x;y;z;aa;bb;cc;dd;ee;ff;gg;hh;ii;jj;kk;ll;mm;nn;oo;pp",
    "Refactor the parser:\n- keep the API stable",
    "Next.js app: set up routing. Then add pages.",
    "\u0000\u0001 control \u0007 chars",
  ];

  it.each(goals.map((g) => [JSON.stringify(g).slice(0, 40), g]))("%s", async (_name, goal) => {
    const plan = await planOf(goal);
    rows(plan);
    for (const t of plan.tasks) expect(Array.from(t.title).length).toBeLessThanOrEqual(80);
  });

  it("accepts 300 random goals with random revisions", async () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const words = [
      "build",
      "then",
      "finally",
      "after step 2",
      "once the api is done",
      "meanwhile",
      "test",
      "api",
      "docs",
      "ünï",
      "🚀",
    ];
    const markers = ["- ", "* ", "1. ", "Step 3: ", "", "  - "];
    const revisions = [
      "add docs after task 2",
      "remove task 1",
      "make 2 depend on 3",
      "make 3 depend on 2",
      "split task 1",
      "sequential",
      "parallel",
      "rename task 1 to X",
      "assign task 2 to coder",
      "drop the api task",
      "add a first step to prepare",
      "random words here",
    ];
    for (let n = 0; n < 300; n += 1) {
      const lines = Array.from(
        { length: 1 + Math.floor(random() * 8) },
        () =>
          `${pick(markers)}${Array.from({ length: 1 + Math.floor(random() * 6) }, () => pick(words)).join(" ")}${pick([".", "", ";", "\n"])}`,
      );
      const revs = Array.from({ length: Math.floor(random() * 4) }, () => pick(revisions));
      const plan = await planOf(lines.join("\n"), revs, random() < 0.2 ? [] : ROSTER);
      expect(PlanSchema.safeParse({ ...plan, productId: "p", version: 1 }).success).toBe(true);
      expect(validatePlanGraph(plan.instances, plan.tasks)).toEqual({ ok: true });
    }
  });
});

describe("splitGoal and makeTitle", () => {
  it("splits bullets, numbers and prose", () => {
    expect(splitGoal("- a\n- b").map((i) => i.text)).toEqual(["a", "b"]);
    expect(splitGoal("1. a\n2) b\nStep 3: c")).toEqual([
      { text: "a", number: 1 },
      { text: "b", number: 2 },
      { text: "c", number: 3 },
    ]);
    expect(splitGoal("Do x, then y and then z; write w").map((i) => i.text)).toEqual([
      "Do x",
      "then y",
      "and then z",
      "write w",
    ]);
  });

  it("keeps titles short: first clause, else a cut at a word boundary", () => {
    expect(makeTitle("then, write the tests.", "x")).toBe("Write the tests");
    const long = `Implement the caching layer, ${"with many details ".repeat(10)}`;
    expect(makeTitle(long, "x")).toBe("Implement the caching layer");
    const title = makeTitle("word ".repeat(40), "x");
    expect(title.endsWith("…")).toBe(true);
    expect(Array.from(title).length).toBeLessThanOrEqual(80);
    expect(makeTitle("...", "Fallback")).toBe("Fallback");
  });
});

// -------------------------------------------------------------------------------------------------------------

function livePlan(): { plan: Plan; tasks: TaskState[] } {
  const instances = [
    { instanceId: "i1", agentId: "claude", role: "coder", name: "Claude" },
    { instanceId: "i2", agentId: "gemini", role: "reviewer", name: "Gemini" },
  ];
  const task = (taskId: string, title: string, dependsOn: string[], instanceId: string): Task => ({
    taskId,
    title,
    description: title,
    instanceId,
    dependsOn,
  });
  const tasks = [
    task("t1", "Write the parser", [], "i1"),
    task("t2", "Write the tests", ["t1"], "i2"),
    task("t3", "Write the docs", ["t2"], "i1"),
  ];
  const status: Record<string, TaskStatus> = { t1: "completed", t2: "running", t3: "pending" };
  return {
    plan: { productId: "prd_1", version: 2, name: "n", summary: "s", instances, tasks },
    tasks: tasks.map((t) => ({ ...t, status: status[t.taskId] ?? "pending", attempts: 1 })),
  };
}

async function send(content: string, live = livePlan()) {
  const chunks: string[] = [];
  const result = await leader.message({
    productId: "prd_1",
    goal: "Build a parser",
    content,
    plan: live.plan,
    tasks: live.tasks,
    roster: ROSTER,
    signal,
    onText: (t) => chunks.push(t),
  });
  expect(chunks.join("")).toBe(result.response);
  if (result.mutations) expect(applyMutations(live.plan, live.tasks, result.mutations).ok).toBe(true);
  return result;
}

describe("HeuristicLeader.message", () => {
  it("turns 'add task: …' into an addTask mutation with the next free id, on the idle instance", async () => {
    const result = await send("add task: write a changelog");
    // t2 runs on i2; i1 is idle (t3 waits for t2): the new task goes to i1 (issue 28; it went to i2, 3 % 2).
    expect(result.mutations).toEqual([
      {
        op: "addTask",
        task: {
          taskId: "t4",
          title: "Write a changelog",
          description: "write a changelog\n\nOverall goal:\nBuild a parser",
          instanceId: "i1",
          dependsOn: [],
        },
      },
    ]);
    expect(result.response).toContain('Added t4 "Write a changelog" on i1 (claude, idle).');
    // The count of the plan as the answer leaves it, the added task included (it said 1 of 3: the count before).
    expect(result.response).toContain("Progress: 1 of 4 tasks completed, 1 running.");
  });

  it("adds a task after another one named by id or title words", async () => {
    const byId = await send("add task: benchmark it after t3");
    expect(byId.mutations?.[0]).toMatchObject({ op: "addTask", task: { dependsOn: ["t3"] } });
    const byWords = await send("add a task to publish the docs after the docs");
    expect(byWords.mutations?.[0]).toMatchObject({
      op: "addTask",
      task: { title: "Publish the docs", dependsOn: ["t3"] },
    });
  });

  it("removes a pending task", async () => {
    const result = await send("remove task t3");
    expect(result.mutations).toEqual([{ op: "removeTask", taskId: "t3" }]);
  });

  it("re-points dependents when removing a task in the middle", async () => {
    const live = livePlan();
    live.tasks = live.tasks.map((t) => ({ ...t, status: t.taskId === "t1" ? "completed" : "pending" }));
    const result = await send("remove task 2", live);
    expect(result.mutations).toEqual([
      { op: "removeDependency", taskId: "t3", dependsOn: "t2" },
      { op: "addDependency", taskId: "t3", dependsOn: "t1" },
      { op: "removeTask", taskId: "t2" },
    ]);
  });

  it("drops a change that applyMutations rejects and says why", async () => {
    const result = await send("remove task t2");
    expect(result.mutations).toBeUndefined();
    expect(result.response).toContain(
      'I did not remove t2 "Write the tests": Task t2 is running and cannot be removed.',
    );
    const running = await send("rename t2 to Something else");
    expect(running.mutations).toBeUndefined();
    expect(running.response).toContain("Task t2 is running and cannot be updated.");
  });

  it("keeps the valid commands of a mixed message", async () => {
    const result = await send("add task: write a changelog\nremove task t1\nmake t3 depend on t4");
    expect(result.mutations).toEqual([
      expect.objectContaining({ op: "addTask" }),
      { op: "addDependency", taskId: "t3", dependsOn: "t4" },
    ]);
    expect(result.response).toContain("I did not remove t1");
  });

  it("acknowledges anything else without mutations", async () => {
    const result = await send("How is it going?");
    expect(result.mutations).toBeUndefined();
    expect(result.response).toBe(
      'Noted: "How is it going?". That does not change the plan.\nProgress: 1 of 3 tasks completed, 1 running.',
    );
  });
});

describe("HeuristicLeader.consultOnFailure", () => {
  function failed(taskId: string, live = livePlan()) {
    const tasks = live.tasks.map((t) =>
      t.taskId === taskId ? { ...t, status: "failed" as const, attempts: 2, error: "tsc: 3 errors" } : t,
    );
    const failedTask = tasks.find((t) => t.taskId === taskId) as TaskState;
    return { productId: "prd_1", goal: "g", failedTask, plan: live.plan, tasks, roster: ROSTER, signal };
  }

  it("adds one fix-up task on another agent's instance that supersedes the failed task and takes its dependents", async () => {
    const req = failed("t2");
    const decision = await leader.consultOnFailure(req);
    expect(decision.kind).toBe("mutate");
    if (decision.kind !== "mutate") return;
    expect(decision.mutations[0]).toMatchObject({
      op: "addTask",
      task: { taskId: "t2-fix", title: "Fix: Write the tests", instanceId: "i1", dependsOn: ["t1"], supersedes: "t2" },
    });
    // The failed task is kept (shown as superseded), not removed.
    expect(decision.mutations.slice(1)).toEqual([
      { op: "removeDependency", taskId: "t3", dependsOn: "t2" },
      { op: "addDependency", taskId: "t3", dependsOn: "t2-fix" },
    ]);
    expect(applyMutations(req.plan, req.tasks, decision.mutations).ok).toBe(true);
    expect(decision.message).toBe(
      'Task t2 "Write the tests" failed after 2 attempts (tsc: 3 errors). I added a fix-up task t2-fix "Fix: Write the tests" on i1 (agent claude, not gemini) to supersede it; t3 now waits for the fix-up instead.',
    );
  });

  it("keeps the fix-up on the failed instance when the failure was the task's own request (refused by policy)", async () => {
    const req = failed("t2");
    req.failedTask = { ...req.failedTask, refusedPermissions: [{ kind: "execute", title: "rm -rf /", by: "policy" }] };
    const decision = await leader.consultOnFailure(req);
    if (decision.kind !== "mutate") throw new Error(decision.message);
    expect(decision.mutations[0]).toMatchObject({ op: "addTask", task: { instanceId: "i2", supersedes: "t2" } });
    expect(decision.message).toContain("on the same instance (what failed was the task's own request");
  });

  it("gives up when the failed task is itself a fix-up", async () => {
    const live = livePlan();
    const fix: Task = {
      taskId: "t2-fix",
      title: "Fix: Write the tests",
      description: "",
      instanceId: "i2",
      dependsOn: ["t1"],
    };
    live.plan = { ...live.plan, tasks: [...live.plan.tasks, fix] };
    live.tasks = [...live.tasks, { ...fix, status: "running", attempts: 1 }];
    const decision = await leader.consultOnFailure(failed("t2-fix", live));
    expect(decision.kind).toBe("giveUp");
    expect(decision.message).toContain("was already a fix-up");
  });

  it("gives up when the task already had a fix-up", async () => {
    const live = livePlan();
    const fix: Task = { taskId: "t2-fix", title: "Fix", description: "", instanceId: "i2", dependsOn: [] };
    live.plan = { ...live.plan, tasks: [...live.plan.tasks, fix] };
    live.tasks = [...live.tasks, { ...fix, status: "completed", attempts: 1 }];
    const decision = await leader.consultOnFailure(failed("t2", live));
    expect(decision).toMatchObject({ kind: "giveUp" });
    expect(decision.message).toContain("already had a fix-up (t2-fix)");
  });
});
