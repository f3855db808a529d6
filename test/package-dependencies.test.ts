/**
 * Every package the sources, tests and fixtures import is declared in package.json at an exact version (issue 28,
 * case 6 pin): a package present only transitively (as `@modelcontextprotocol/sdk` was, for the MCP fixture of the
 * real-agent suite) disappears or changes major version when the package that pulls it in is upgraded.
 */
import { readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packagePath } from "../src/package-files.js";

const SOURCE_FILE = /\.(ts|mts|mjs|js|cjs)$/;
/** Static imports and re-exports at the start of a line (never a string of generated code inside a test). */
const STATIC_IMPORT = /^(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']|^import\s+["']([^"']+)["']/gm;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" || entry.name === "dist" ? [] : sourceFiles(path);
    return SOURCE_FILE.test(entry.name) ? [path] : [];
  });
}

/** The package a bare specifier names (`@scope/name/sub.js` → `@scope/name`), or undefined for a relative path. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:")) return undefined;
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

function importedPackages(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(STATIC_IMPORT)]
    .map((match) => packageOf(match[1] ?? match[2] ?? "."))
    .filter((name): name is string => name !== undefined && !builtinModules.includes(name));
}

describe("package dependencies", () => {
  const manifest = JSON.parse(readFileSync(packagePath("package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  const declared = { ...manifest.dependencies, ...manifest.devDependencies };

  it("declares every package that src/, test/ and scripts/ import, none only transitively", () => {
    const undeclared = ["src", "test", "scripts"]
      .flatMap((dir) => sourceFiles(packagePath(dir)))
      .flatMap((file) => importedPackages(file).map((name) => `${name} (${file})`))
      .filter((entry) => !(entry.split(" ")[0]! in declared));
    expect(undeclared).toEqual([]);
  });

  it("pins the MCP SDK the real-agent MCP fixture imports, at the version package-lock.json holds", () => {
    const fixture = packagePath("test/agents/fixtures/notes-mcp-server.mjs");
    expect(importedPackages(fixture)).toContain("@modelcontextprotocol/sdk");
    const lock = JSON.parse(readFileSync(packagePath("package-lock.json"), "utf8")) as {
      packages: Record<string, { version?: string; devDependencies?: Record<string, string> }>;
    };
    const locked = lock.packages["node_modules/@modelcontextprotocol/sdk"]?.version;
    expect(manifest.devDependencies["@modelcontextprotocol/sdk"]).toBe(locked);
    expect(lock.packages[""]?.devDependencies?.["@modelcontextprotocol/sdk"]).toBe(locked);
  });

  it("pins every declared package at an exact version (no ranges)", () => {
    const ranged = Object.entries(declared).filter(([, version]) => !/^\d+\.\d+\.\d+$/.test(version));
    expect(ranged).toEqual([]);
  });
});
