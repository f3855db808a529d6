/**
 * What a task's tool call shows in an ACP session (src/server/session/view.ts): refused permissions are shown (issue
 * 11, "an IDE refusal is shown too"); the real-agent suite shows the same with claude-code-acp
 * (test/agents/claude-permissions.test.ts).
 */
import { describe, expect, it } from "vitest";
import type { TaskState } from "../../../protocol/common.js";
import { cleanTitle, toolText, verificationText } from "../../../src/server/session/view.js";

function task(patch: Partial<TaskState>): TaskState {
  return {
    taskId: "t1",
    title: "Write the note",
    description: "Create notes/a.md.",
    instanceId: "w1",
    dependsOn: [],
    status: "completed",
    attempts: 1,
    ...patch,
  } as TaskState;
}

describe("toolText", () => {
  it("shows a permission the IDE refused after a completed task's output", () => {
    const text = toolText(
      task({
        output: "I could not write it.",
        refusedPermissions: [{ kind: "edit", title: "Write notes/a.md", by: "client" }],
      }),
    );
    expect(text).toBe('I could not write it.\n\nPermission refused by you: edit "Write notes/a.md"');
  });

  it("shows a failed task's error once, with only the IDE's refusals added (the error names the policy's)", () => {
    const text = toolText(
      task({
        status: "failed",
        error: 'The permission policy "deny" refused edit "Write notes/a.md" to agent "claude".',
        refusedPermissions: [
          { kind: "edit", title: "Write notes/a.md", by: "policy" },
          { kind: "execute", title: "npm test", by: "client" },
        ],
      }),
    );
    expect(text).toBe(
      'The permission policy "deny" refused edit "Write notes/a.md" to agent "claude".\n\n' +
        'Permission refused by you: execute "npm test"',
    );
  });

  it("shows only the output when nothing was refused", () => {
    expect(toolText(task({ output: "Done." }))).toBe("Done.");
  });
});

describe("cleanTitle", () => {
  it("drops list markers and leading ordering words, joins a goal's lines with '; ' (issue 15)", () => {
    expect(cleanTitle("- Write the parser\n- Then write the docs\n- In parallel, add examples\n- Finally: ship")).toBe(
      "Write the parser; write the docs; add examples; ship",
    );
    expect(cleanTitle("1. first, collect the logs\n2) next find the cause")).toBe("Collect the logs; find the cause");
    expect(cleanTitle("Parser and tests for the parser")).toBe("Parser and tests for the parser");
  });

  it("keeps words that only start like an ordering word, and cuts at 80 characters on a word", () => {
    expect(cleanTitle("Next.js migration")).toBe("Next.js migration");
    expect(cleanTitle("First-run wizard")).toBe("First-run wizard");
    expect(cleanTitle("Thenable support")).toBe("Thenable support");
    const long = cleanTitle(`- ${"word ".repeat(30)}`);
    expect(long.length).toBeLessThanOrEqual(80);
    expect(long.endsWith("…")).toBe(true);
    expect(cleanTitle(" \n - \n")).toBe("Product");
  });
});

describe("verificationText (product.taskVerified for a plain ACP client)", () => {
  it("names each check with its exit code and duration, then the failing check's output tail", () => {
    const text = verificationText({
      tree: "a".repeat(40),
      ok: false,
      checks: [
        { name: "build", ok: true, exitCode: 0, durationMs: 120, outputTail: "built" },
        { name: "unit tests", ok: false, exitCode: 1, durationMs: 812.4, outputTail: "not ok 1 - add sums\n" },
      ],
    });
    expect(text).toBe(
      `Verification of tree ${"a".repeat(12)}: failed.\n✓ build (exit 0, 120 ms)\n✗ unit tests (exit 1, 812 ms)\n\nnot ok 1 - add sums`,
    );
  });
});
