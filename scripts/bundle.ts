/**
 * Bundles the compiled command dispatcher (dist/src/main.js and everything it imports) into dist/bundle/ with esbuild
 * (issue 16, cold start): Node's module loader spent about half of the server's start-up resolving, reading and
 * compiling about 150 files (ours, zod's, vscode-jsonrpc's); the bundle is a few. The executable (src/cli.ts) runs it.
 *
 * Usage: `node dist/scripts/bundle.js` after `tsc -p tsconfig.build.json` (`npm run build` runs both). Reads dist/src,
 * dist/protocol and node_modules; writes dist/bundle/ only, replacing it whole, and makes the executable
 * dist/src/cli.js executable (mode 755: tsc writes 644, and `npx acp-orchestrator` in the checkout runs the `bin`
 * file itself, so without it the shell answers "Permission denied"; issue 35).
 *
 * - Code splitting keeps lazy loading lazy: what a module loads with `import()` (the other commands, the ACP SDK
 *   adapters, the PostgreSQL store) stays out of what `serve` loads. Those modules are entry points of their own, so
 *   their files have stable names (test/e2e/start-up-modules.test.ts names them).
 * - Packages stay outside when bundling them would change them: better-sqlite3 (a native addon), pg and the ACP SDK
 *   (loaded on first use only), dagre (the dashboard). zod, vscode-jsonrpc and pino (about 120 files between them,
 *   all on the start-up path) are bundled. pino is bundled because the server never uses a pino transport (it logs
 *   through a synchronous `pino.destination`, src/server/logger.ts): a transport starts a worker thread on a file
 *   found through `__dirname`, which a bundle does not have, so `pino.transport` must not be used (lint forbids it).
 * - Whitespace and comments are removed and syntax is shortened (`minifyWhitespace`, `minifySyntax`): V8 reads every
 *   byte of what a start loads, and the docstrings were a third of it. Identifiers are kept, so stack traces and
 *   profiles still name our functions; the linked source maps lead back to the compiled files.
 * - The dashboard's browser code from packages (d3-zoom and d3-selection for the DAG's zoom and pan, diff2html for
 *   diffs) is bundled for the browser into one script, `dist/bundle/dashboard-vendor.js` (an IIFE defining
 *   `window.acpVendor`), with diff2html's stylesheet beside it (`dashboard-vendor.css`); the dashboard serves both
 *   itself, so the page needs no network but its own server.
 * - Modules that find another file of the package ask src/package-files.ts, which knows this layout; nothing in the
 *   bundle resolves a sibling of its own `import.meta.url`.
 */
import { chmodSync, copyFileSync, existsSync, rmSync } from "node:fs";
import * as esbuild from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const OUT = join(ROOT, "dist", "bundle");

/** The `bin` of package.json (its first line is the `#!/usr/bin/env node` of src/cli.ts, which tsc keeps). */
const BIN = join(ROOT, "dist", "src", "cli.js");

/** Modules loaded with `import()` that get an entry point (and a stable file name) of their own, by output name. */
const LAZY_ENTRIES = {
  main: "dist/src/main.js",
  "commands/serve": "dist/src/commands/serve.js",
  "commands/index": "dist/src/commands/index.js",
  "commands/output": "dist/src/commands/output.js",
  "adapters/agents/acp-worker": "dist/src/adapters/agents/acp-worker.js",
  "adapters/agents/leader-resolver": "dist/src/adapters/agents/leader-resolver.js",
  "adapters/persistence/postgres-authority": "dist/src/adapters/persistence/postgres-authority.js",
  demo: "dist/src/demo.js",
};

/** Packages left to Node's loader (see the header). */
const EXTERNAL = ["better-sqlite3", "pg", "pg-*", "@agentclientprotocol/sdk", "@dagrejs/dagre"];

async function main(): Promise<void> {
  rmSync(OUT, { recursive: true, force: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(Object.entries(LAZY_ENTRIES).map(([out, file]) => [out, join(ROOT, file)])),
    outdir: OUT,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: EXTERNAL,
    chunkNames: "chunks/[name]-[hash]",
    sourcemap: "linked",
    // The bundled CommonJS packages (vscode-jsonrpc) call `require` for Node's built-ins: give the ES module one.
    banner: {
      js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
    },
    logLevel: "warning",
    legalComments: "none",
    minifyWhitespace: true,
    minifySyntax: true,
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed with ${result.errors.length} errors`);
  chmodSync(BIN, 0o755);
  await bundleDashboardVendor();
}

/**
 * The dashboard's third-party browser code and stylesheet (see the header). A checkout whose node_modules predates
 * these packages (`npm install` not run since) gets a warning and no vendor files: the dashboard then works without
 * zoom and shows diffs as text.
 */
async function bundleDashboardVendor(): Promise<void> {
  if (!["d3-zoom", "d3-selection", "diff2html"].every((p) => existsSync(join(ROOT, "node_modules", p)))) {
    process.stderr.write(
      "bundle: d3-zoom, d3-selection or diff2html is not installed (run npm install): the dashboard has no zoom\n",
    );
    return;
  }
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    stdin: {
      contents: [
        'export { zoom, zoomIdentity } from "d3-zoom";',
        'export { select } from "d3-selection";',
        'export { html as diffHtml } from "diff2html";',
      ].join("\n"),
      resolveDir: ROOT,
      sourcefile: "dashboard-vendor.js",
    },
    outfile: join(OUT, "dashboard-vendor.js"),
    bundle: true,
    format: "iife",
    globalName: "acpVendor",
    platform: "browser",
    target: "es2020",
    minify: true,
    legalComments: "eof",
    logLevel: "warning",
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed with ${result.errors.length} errors`);
  copyFileSync(
    join(ROOT, "node_modules", "diff2html", "bundles", "css", "diff2html.min.css"),
    join(OUT, "dashboard-vendor.css"),
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bundle: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
