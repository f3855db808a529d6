/**
 * Where the package's own files are from each of its layouts (src/package-files.ts; issue 16, cold start): the
 * bundle moves modules out of dist/src/, so nothing may look for a sibling of its own `import.meta.url`.
 */
import { describe, expect, it } from "vitest";
import { packageLayout, packageModulePath, packagePath } from "../src/package-files.js";

describe("package files", () => {
  it("finds the root above dist/ from a bundle chunk and from a compiled module", () => {
    for (const url of [
      "file:///opt/app/dist/bundle/chunks/chunk-ABC.js",
      "file:///opt/app/dist/src/adapters/agents/registry.js",
    ]) {
      const layout = packageLayout(url);
      expect(layout).toEqual({ rootUrl: "file:///opt/app/", fromSource: false });
      expect(packageModulePath("cli", layout)).toBe("/opt/app/dist/src/cli.js");
      expect(packagePath("package.json", layout)).toBe("/opt/app/package.json");
    }
  });

  it("finds the root above the last src/ from sources, and names the .ts file", () => {
    const layout = packageLayout("file:///home/me/src/app/src/commands/version.ts");
    expect(layout).toEqual({ rootUrl: "file:///home/me/src/app/", fromSource: true });
    expect(packageModulePath("adapters/agents/builtin-worker-agent", layout)).toBe(
      "/home/me/src/app/src/adapters/agents/builtin-worker-agent.ts",
    );
  });

  it("refuses a module outside the package's folders", () => {
    expect(() => packageLayout("file:///tmp/copy/registry.js")).toThrow(/not inside this package's dist\/ folder/);
  });

  it("finds this repository's package.json from this run's own layout", () => {
    expect(packagePath("package.json")).toMatch(/\/package\.json$/);
    expect(packageLayout().fromSource).toBe(true);
  });
});
