/**
 * Bundles the compiled command dispatcher (dist/src/main.js and everything it imports) into one CommonJS file,
 * dist/bundle/main.cjs, with esbuild, and writes the V8 code cache of it (issues 16 and 34, cold start): Node's module
 * loader spent about half of the server's start-up resolving, reading and compiling about 150 files (ours, zod's,
 * vscode-jsonrpc's, the ACP SDK's), and V8 most of the rest parsing and compiling the bundle. The executable
 * (src/cli.ts) runs the bundle through src/code-cache.ts, which hands V8 the cache.
 *
 * Usage: `node dist/scripts/bundle.js` after `tsc -p tsconfig.build.json` (`npm run build` runs both). Reads dist/src,
 * dist/protocol and node_modules; writes dist/bundle/ only, replacing it whole, and makes the executable
 * dist/src/cli.js executable (mode 755: tsc writes 644, and `npx acp-orchestrator` in the checkout runs the `bin`
 * file itself, so without it the shell answers "Permission denied"; issue 35).
 *
 * - One CommonJS file, because Node 20 caches compiled code for `vm.Script` only, not for ES modules. esbuild wraps
 *   every module reached through `import()` (the other commands, the ACP SDK adapters, the PostgreSQL store, the
 *   dashboard) in a function run on first use, so lazy loading stays lazy: their code is in the file but never
 *   evaluated by a start of `serve` (test/e2e/start-up-modules.test.ts).
 * - The code cache is written by a training run (trainCodeCache): the built `serve` answers one `initialize` and
 *   exits, and the cache then holds every function that run compiled. Measured on 2 loaded cores (issue 34): spawn →
 *   `initialize` answered 1.64x the echo with it, 2.10x with a cache of the top level only, 2.40x without.
 * - Packages stay outside when bundling them would change them, or need not be in it: better-sqlite3 (a native
 *   addon), pg and dagre (CommonJS, required on first use only: the PostgreSQL store, the dashboard). The ACP SDK is
 *   bundled because it is an ES module, which Node 20 before 20.19 cannot `require`; like the adapters that use it,
 *   it is evaluated on first use only. zod, vscode-jsonrpc and pino are bundled. pino is bundled because the server never uses a pino
 *   transport (it logs through a synchronous `pino.destination`, src/server/logger.ts): a transport starts a worker
 *   thread on a file found through `__dirname`, which is the bundle's folder, so `pino.transport` must not be used
 *   (lint forbids it).
 * - Whitespace and comments are removed and syntax is shortened (`minifyWhitespace`, `minifySyntax`): V8 reads every
 *   byte of what a start loads, and the docstrings were a third of it.
 * - The bundle is ASCII only (asciiOnly; issue 34, cold start): esbuild escapes non-ASCII characters in strings but
 *   not in regular expression literals or raw templates (the heuristic leader's CJK words, the dashboard's script),
 *   and one such character makes the whole 1.4 MB source a two-byte string: slower to decode from UTF-8 when it is
 *   read and twice the memory. Measured on 2 loaded cores: reading the bundle 30 ms of CPU as UTF-8 with them, 5 ms
 *   without; spawn → `initialize` about 10 ms of CPU less. Identifiers are kept, so stack traces and
 *   profiles still name our functions; the linked source map leads back to the compiled files.
 * - The dashboard's browser code from packages (d3-zoom and d3-selection for the DAG's zoom and pan, diff2html for
 *   diffs) is bundled for the browser into one script, `dist/bundle/dashboard-vendor.js` (an IIFE defining
 *   `window.acpVendor`), with diff2html's stylesheet beside it (`dashboard-vendor.css`); the dashboard serves both
 *   itself, so the page needs no network but its own server.
 * - Modules that find another file of the package ask src/package-files.ts, which knows this layout; nothing in the
 *   bundle resolves a sibling of its own `import.meta.url` (which is the bundle's URL).
 */
import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as esbuild from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CODE_CACHE_OUT_ENV } from "../src/code-cache.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const OUT = join(ROOT, "dist", "bundle");

/** The `bin` of package.json (its first line is the `#!/usr/bin/env node` of src/cli.ts, which tsc keeps). */
const BIN = join(ROOT, "dist", "src", "cli.js");

/** The command dispatcher, compiled (tsc); the one entry point of the bundle. */
const ENTRY = join(ROOT, "dist", "src", "main.js");

/** The bundle, and the V8 code cache of it that the training run writes (src/cli.ts reads both). */
const BUNDLE = join(OUT, "main.cjs");
const CODE_CACHE = join(OUT, "main.cjs.cache");

/** Packages left to Node's loader (see the header): CommonJS, required on first use. */
const EXTERNAL = ["better-sqlite3", "pg", "pg-*", "@dagrejs/dagre"];

async function main(): Promise<void> {
  rmSync(OUT, { recursive: true, force: true });
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: [ENTRY],
    outfile: BUNDLE,
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: EXTERNAL,
    sourcemap: "linked",
    // A CommonJS file has no `import.meta`: its URL is the bundle's own (src/package-files.ts knows the layout).
    define: { "import.meta.url": "__bundleUrl" },
    banner: { js: 'const __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
    logLevel: "warning",
    legalComments: "none",
    minifyWhitespace: true,
    minifySyntax: true,
    plugins: [lazyRequires],
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed with ${result.errors.length} errors`);
  writeFileSync(BUNDLE, asciiOnly(readFileSync(BUNDLE, "utf8")));
  chmodSync(BIN, 0o755);
  await trainCodeCache();
  await bundleDashboardVendor();
}

/**
 * A `require` a package runs when it loads, which the bundle turns into one run on first use (issue 34, cold start):
 * in `file` (a path under node_modules), each `eager` text (which must occur exactly once) becomes its `lazy` text.
 */
interface LazyRequire {
  file: RegExp;
  edits: { eager: string; lazy: string }[];
}

/**
 * The requires a start of `serve` ran before it answered `initialize` for code it never runs there. Each cost CPU of
 * every start (a Node built-in is compiled and run on its first `require`, with those it requires):
 * - vscode-jsonrpc's Node entry (lib/node/main.js) and runtime (lib/node/ril.js) require `crypto` when they load but
 *   use it only in functions (`randomUUID`, `randomBytes`) the server never calls before `initialize` is answered: that
 *   `require` becomes an object whose two properties require `crypto` when read (4-10 ms of CPU on 2 loaded cores).
 * - sonic-boom (pino's synchronous destination) requires `assert` for one check in a function; `assert` loads
 *   five more built-ins, one of which opens `process.stderr` as a stream to learn its colours.
 * - pino's tools require `worker_threads` for `isMainThread`, read only for an asynchronous destination (the server's
 *   are synchronous, src/server/logger.ts), and pino's transport (a worker thread; lint forbids `pino.transport`),
 *   which loads `worker_threads` and `module` too: `isMainThread` and the transport are required when used.
 * A build where a file no longer holds its exact text fails, rather than bundling it unchanged.
 */
const LAZY_REQUIRES: LazyRequire[] = [
  {
    file: /[\\/]vscode-jsonrpc[\\/]lib[\\/]node[\\/](main|ril)\.js$/,
    edits: [
      {
        eager: 'const crypto_1 = require("crypto");',
        lazy:
          'const crypto_1 = { get randomUUID() { return require("crypto").randomUUID; }, ' +
          'get randomBytes() { return require("crypto").randomBytes; } };',
      },
    ],
  },
  {
    file: /[\\/]sonic-boom[\\/]index\.js$/,
    edits: [
      {
        eager: "const assert = require('assert')",
        lazy: "const assert = (value, message) => require('assert')(value, message)",
      },
    ],
  },
  {
    file: /[\\/]pino[\\/]lib[\\/]tools\.js$/,
    edits: [
      {
        eager: "const { isMainThread } = require('worker_threads')",
        lazy: "const workerThreads = () => require('worker_threads')",
      },
      { eager: "if (!opts.sync && isMainThread) {", lazy: "if (!opts.sync && workerThreads().isMainThread) {" },
      {
        eager: "const transport = require('./transport')",
        lazy: "const transport = (options) => require('./transport')(options)",
      },
    ],
  },
  {
    file: /[\\/]pino[\\/]pino\.js$/,
    edits: [
      {
        eager: "module.exports.transport = require('./lib/transport')",
        lazy:
          "Object.defineProperty(module.exports, 'transport', " +
          "{ get: () => require('./lib/transport'), enumerable: true, configurable: true })",
      },
    ],
  },
];

/** Applies LAZY_REQUIRES as files are loaded (see there). */
const lazyRequires: esbuild.Plugin = {
  name: "lazy-requires",
  setup(build) {
    for (const { file, edits } of LAZY_REQUIRES) {
      build.onLoad({ filter: file }, (args) => {
        let source = readFileSync(args.path, "utf8");
        for (const { eager, lazy } of edits) {
          if (source.split(eager).length !== 2) throw new Error(`bundle: ${args.path} no longer holds ${eager}`);
          source = source.replace(eager, () => lazy);
        }
        return { contents: source, loader: "js" };
      });
    }
  },
};

/**
 * `code` (esbuild's output, JavaScript) with every non-ASCII UTF-16 code unit written as a `\uXXXX` escape. What is
 * left unescaped by esbuild sits in regular expression literals and raw template text that is JavaScript or a regular
 * expression's source (checked: every `String.raw` of src/ is one or the other); there, as in strings and identifiers,
 * the escape means the character itself (an astral character as its two surrogate escapes, which a `u` regular
 * expression reads as one code point). An escaped character (a backslash before it) would become a literal `\u`:
 * that is refused (a build error). Comments need no care: the minified bundle keeps none (legalComments is "none").
 * Changes no line count, so the source map stays right but for the columns after an escape on its line.
 */
function asciiOnly(code: string): string {
  return code.replace(/[\u0080-\uffff]/g, (char, at: number) => {
    let backslashes = 0;
    while (code[at - 1 - backslashes] === "\\") backslashes += 1;
    if (backslashes % 2 === 1) {
      throw new Error(
        `bundle: an escaped non-ASCII character at ${at} (${code.slice(at - 40, at + 10)}) cannot be escaped`,
      );
    }
    return `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}

/**
 * The training run: starts the built executable's `serve` on a throw-away state file with CODE_CACHE_OUT_ENV set,
 * answers one `initialize` and closes stdin; the executable writes the bundle's code cache when it exits (src/cli.ts).
 * `--heap-growth-percent 0` because a changed V8 flag changes the flag hash V8 stamps on the cache, and a normal start
 * reads the cache before serve sets that flag (src/adapters/system/heap-growth.ts: 0 sets nothing). A failed
 * training run is a build error: the cache is optional at run time, but a build that cannot start `serve` is broken.
 */
async function trainCodeCache(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "acp-orch-bundle-"));
  try {
    const child = spawn(
      process.execPath,
      [BIN, "serve", "--state", join(dir, "state.db"), "--log-level", "silent", "--heap-growth-percent", "0"],
      { cwd: dir, env: { ...process.env, [CODE_CACHE_OUT_ENV]: CODE_CACHE }, stdio: ["pipe", "pipe", "inherit"] },
    );
    const exited = new Promise<number | null>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", resolve);
    });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      if (out.includes("\n")) child.stdin.end();
    });
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: TRAINING_INITIALIZE })}\n`,
    );
    const code = await exited;
    if (code !== 0 || !out.startsWith('{"jsonrpc":"2.0","id":1,"result"') || !existsSync(CODE_CACHE)) {
      throw new Error(`the code cache training run failed (exit ${String(code)}): ${out.slice(0, 500)}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the training run's client sends in `initialize`. */
const TRAINING_INITIALIZE = {
  protocolVersion: 1,
  clientCapabilities: {},
  clientInfo: { name: "bundle", version: "1" },
};

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
