/**
 * The docs test's reading of a markdown page (docs/DEVELOPING.md, "Documentation that runs"): which fenced blocks run,
 * with which options, what output they expect, and the loose comparison of that output.
 *
 * A block runs when its info string is `sh test` (or `bash test`), with optional words `needs=postgres|chromium`
 * (run only where CI provides them), `creates=PATH[,PATH]` (files it leaves in the checkout on purpose) and
 * `timeout=SECONDS` (default 60). A ```text block right after it (only blank lines between) is its expected output:
 * every non-empty line of it must appear, in order, among the output's lines once both are normalised (ids, times,
 * durations, paths), where `...` inside an expected line matches anything. It also lists a page's relative links (the
 * docs test checks that each names a file). Owns parsing and matching only.
 */

/** One runnable block of a page. */
export interface DocsBlock {
  /** The page, relative to the repository root. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The shell text. */
  script: string;
  needs: string[];
  creates: string[];
  timeoutMs: number;
  /** The expected output (a following ```text block), if any. */
  expected?: string;
}

const FENCE = /^```(\S*)\s*(.*)$/;
const SHELLS = new Set(["sh", "bash", "shell"]);

/** The runnable blocks of `markdown` (the page `file`), in page order. */
export function parseDocsBlocks(file: string, markdown: string): DocsBlock[] {
  const lines = markdown.split("\n");
  const fences: { line: number; end: number; lang: string; words: string[]; body: string }[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = FENCE.exec(lines[i] ?? "");
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i += 1; i < lines.length && !(lines[i] ?? "").startsWith("```"); i += 1) body.push(lines[i] ?? "");
    const words = (open[2] ?? "").split(/\s+/).filter(Boolean);
    fences.push({ line: start + 1, end: i, lang: open[1] ?? "", words, body: body.join("\n") });
  }
  const blocks: DocsBlock[] = [];
  fences.forEach((fence, index) => {
    if (!SHELLS.has(fence.lang) || !fence.words.includes("test")) return;
    const option = (name: string) => fence.words.find((w) => w.startsWith(`${name}=`))?.slice(name.length + 1);
    const next = fences[index + 1];
    const between = next ? lines.slice(fence.end + 1, next.line - 1) : [];
    const expected = next?.lang === "text" && between.every((l) => l.trim() === "") ? next.body : undefined;
    blocks.push({
      file,
      line: fence.line,
      script: fence.body,
      needs: option("needs")?.split(",") ?? [],
      creates: option("creates")?.split(",") ?? [],
      timeoutMs: Number(option("timeout") ?? 60) * 1000,
      ...(expected === undefined ? {} : { expected }),
    });
  });
  return blocks;
}

/** Output made comparable: paths given in `paths` (longest first) named, ids, times and durations replaced. */
export function normalizeOutput(text: string, paths: Readonly<Record<string, string>> = {}): string[] {
  let out = text;
  for (const [path, name] of Object.entries(paths).sort((a, b) => b[0].length - a[0].length)) {
    out = out.split(path).join(name);
  }
  out = out
    .replace(/\b(prd|ckp|ses|goal|req|run)_[A-Za-z0-9]{6,}\b/g, "$1_<id>")
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "<uuid>")
    .replace(/\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?\b/g, "<time>")
    .replace(/\b\d+(\.\d+)?\s?(ms|s|min|h)\b/g, "<duration>")
    .replace(/\/tmp\/[^\s/]+/g, "<tmp>");
  return out.split("\n").map((l) => l.replace(/\s+/g, " ").trim());
}

/**
 * The first expected line (normalised) that does not appear in order among the actual lines, or undefined when all
 * do. `...` in an expected line matches any text.
 */
export function missingExpectedLine(actual: readonly string[], expected: readonly string[]): string | undefined {
  let at = 0;
  for (const want of expected) {
    if (want === "") continue;
    const pattern = new RegExp(`^${want.split("...").map(escapeRegExp).join(".*")}$`);
    while (at < actual.length && !pattern.test(actual[at] ?? "")) at += 1;
    if (at === actual.length) return want;
    at += 1;
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The relative link targets of `markdown` (`[text](path)` outside fenced blocks; `#anchor` cut, URLs skipped). */
export function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "");
  return [...prose.matchAll(/\]\(([^)\s#]+)(?:#[^)\s]*)?\)/g)]
    .map((m) => m[1] ?? "")
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}
