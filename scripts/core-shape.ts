/**
 * Prints how far the product and goal cores are from their shape (issue 27, "Must show"): the number of classes that
 * `extends` another class, of `protected` members, and of module-level mutable variables (`let`/`var` at the top of a
 * module) in src/core/product and src/core/goal, one line each plus a total, and exits 1 when any is not 0. Run by
 * `npm run lint` (so by CI); `npx tsx scripts/core-shape.ts --list` also names each finding's file and line.
 * The lint rule in eslint.config.js forbids the same syntax; this script counts it. Reads files only.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dirname, "..");
const DIRS = ["src/core/product", "src/core/goal"];

interface Finding {
  kind: "extends" | "protected" | "module-level let";
  file: string;
  line: number;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return filesUnder(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

function findingsOf(path: string): Finding[] {
  const source = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.ES2022, true);
  const file = relative(ROOT, path);
  const out: Finding[] = [];
  const at = (node: ts.Node, kind: Finding["kind"]): void => {
    out.push({ kind, file, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1 });
  };
  for (const statement of source.statements) {
    if (ts.isVariableStatement(statement) && !(statement.declarationList.flags & ts.NodeFlags.Const)) {
      at(statement, "module-level let");
    }
  }
  const visit = (node: ts.Node): void => {
    if ((ts.isClassDeclaration(node) || ts.isClassExpression(node)) && node.heritageClauses) {
      for (const clause of node.heritageClauses) {
        if (clause.token === ts.SyntaxKind.ExtendsKeyword) at(clause, "extends");
      }
    }
    if (ts.canHaveModifiers(node)) {
      for (const modifier of ts.getModifiers(node) ?? []) {
        if (modifier.kind === ts.SyntaxKind.ProtectedKeyword) at(modifier, "protected");
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

const findings = DIRS.flatMap((dir) => filesUnder(join(ROOT, dir))).flatMap(findingsOf);
const kinds: Finding["kind"][] = ["extends", "protected", "module-level let"];
const lines = kinds.map((kind) => `${kind}: ${findings.filter((f) => f.kind === kind).length}`);
process.stdout.write(`core shape (${DIRS.join(", ")}): ${lines.join(", ")}, total ${findings.length}\n`);
if (process.argv.includes("--list")) {
  for (const f of findings) process.stdout.write(`  ${f.file}:${f.line} ${f.kind}\n`);
}
process.exitCode = findings.length === 0 ? 0 : 1;
