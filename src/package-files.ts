/**
 * Where this package's own files are (issue 16, cold start), whichever of its three layouts the running code is in:
 * the bundle `npm run build` makes of the CLI (`dist/bundle/`, one file for many modules), the compiled modules
 * (`dist/src/`, one file per module) or the TypeScript sources (`src/`, under tsx or vitest). A module that starts
 * another of the package's programs (the CLI, the built-in worker) or reads one of its files (package.json) asks here
 * instead of resolving a sibling of its own `import.meta.url`, which the bundle moves.
 *
 * Owns the layout only. Must never read or check the files it names (callers decide what a missing file means).
 */
import { fileURLToPath } from "node:url";

/** The package root and whether the code runs from its TypeScript sources, as seen from `moduleUrl`. */
export interface PackageLayout {
  /** The package root as a `file:` URL ending in `/`. */
  readonly rootUrl: string;
  /** True under tsx/vitest (`src/**\/*.ts`), false in `dist/src/` and in `dist/bundle/`. */
  readonly fromSource: boolean;
}

/**
 * The layout `moduleUrl` (default: this module's own URL, wherever the bundle put it) belongs to: the root is the
 * folder above the last `/dist/` of the URL for compiled and bundled code, above the last `/src/` for sources.
 * Throws when the URL is in neither (a copy of a module outside the package), rather than guess.
 */
export function packageLayout(moduleUrl: string = import.meta.url): PackageLayout {
  const url = new URL(moduleUrl);
  const path = url.pathname;
  const fromSource = path.endsWith(".ts");
  const marker = fromSource ? "/src/" : "/dist/";
  const at = path.lastIndexOf(marker);
  if (at < 0) throw new Error(`${moduleUrl} is not inside this package's ${fromSource ? "src/" : "dist/"} folder`);
  url.pathname = path.slice(0, at + 1);
  url.search = "";
  url.hash = "";
  return { rootUrl: url.href, fromSource };
}

/** The absolute path of `relative` (a `/`-separated path from the package root, e.g. `package.json`). */
export function packagePath(relative: string, layout: PackageLayout = packageLayout()): string {
  return fileURLToPath(new URL(relative, layout.rootUrl));
}

/**
 * The file to run for the module `src/<module>` (no extension, e.g. `cli` or `adapters/agents/builtin-worker-agent`):
 * `src/<module>.ts` from sources, else the compiled `dist/src/<module>.js` (which is, for `cli`, the launcher of the
 * bundle). A `.ts` path needs a TypeScript loader (`--import tsx`); choosing one is the caller's business.
 */
export function packageModulePath(module: string, layout: PackageLayout = packageLayout()): string {
  return packagePath(layout.fromSource ? `src/${module}.ts` : `dist/src/${module}.js`, layout);
}
