/**
 * The docs test's reading of a page (scripts/docs-blocks.ts, issue 35): which blocks run with which options, the
 * expected output that follows a block, the loose comparison, and the relative links it checks. The docs test itself
 * (`npm run test:docs`, scripts/docs-test.ts) runs the blocks of README.md and docs/*.md on a fresh clone.
 */
import { describe, expect, it } from "vitest";
import { missingExpectedLine, normalizeOutput, parseDocsBlocks, relativeLinks } from "../../scripts/docs-blocks.js";

const PAGE = [
  "# A page",
  "",
  "```sh",
  "echo illustration only",
  "```",
  "",
  "```sh test timeout=5 needs=postgres creates=out.txt,logs/",
  "echo run > out.txt",
  "```",
  "",
  "```text",
  "run",
  "```",
  "",
  "```bash test",
  "true",
  "```",
  "Some prose between.",
  "```text",
  "not this block's output",
  "```",
].join("\n");

describe("parseDocsBlocks", () => {
  it("runs only `sh test`/`bash test` blocks, with their options and line, in page order", () => {
    const blocks = parseDocsBlocks("docs/PAGE.md", PAGE);
    expect(blocks.map((b) => [b.file, b.line, b.script])).toEqual([
      ["docs/PAGE.md", 7, "echo run > out.txt"],
      ["docs/PAGE.md", 15, "true"],
    ]);
    expect(blocks[0]).toMatchObject({ timeoutMs: 5_000, needs: ["postgres"], creates: ["out.txt", "logs/"] });
    expect(blocks[1]).toMatchObject({ timeoutMs: 60_000, needs: [], creates: [] });
  });

  it("takes a text block as the expected output only when nothing but blank lines comes between", () => {
    const [first, second] = parseDocsBlocks("p.md", PAGE);
    expect(first?.expected).toBe("run");
    expect(second?.expected).toBeUndefined();
  });
});

describe("expected output", () => {
  it("matches every expected line in order, with `...` for any text, after ids, times and paths are normalised", () => {
    const actual = normalizeOutput(
      "product prd_a0882a96b570469f9feb\n  t1    completed    4.1 s  Write a README\nat 2026-12-03T12:29:31.370Z\n" +
        "in /tmp/tmp.AbC123/x and /work/clone/file\n",
      { "/work/clone": "<repo>" },
    );
    expect(actual.slice(0, 4)).toEqual([
      "product prd_<id>",
      "t1 completed <duration> Write a README",
      "at <time>",
      "in <tmp>/x and <repo>/file",
    ]);
    expect(missingExpectedLine(actual, normalizeOutput("product prd_x1y2z3w4\nt1 completed ... README"))).toBe(
      undefined,
    );
    expect(missingExpectedLine(actual, ["t1 completed ... README", "product prd_<id>"])).toBe("product prd_<id>");
    expect(missingExpectedLine(actual, ["t2 completed ..."])).toBe("t2 completed ...");
  });
});

describe("relativeLinks", () => {
  it("lists relative targets outside fenced blocks, without anchors, and skips URLs", () => {
    const page = [
      "See [the design](DESIGN.md#layers), [the bench](../BENCHMARKS.md) and [ACP](https://agentclientprotocol.com).",
      "Mail [us](mailto:x@example.com).",
      "```md",
      "[not a link](inside-a-fence.md)",
      "```",
      "[an anchor only](#here)",
    ].join("\n");
    expect(relativeLinks(page)).toEqual(["DESIGN.md", "../BENCHMARKS.md"]);
  });
});
