// Lint rules that guard the project's invariants: no console in src/ (stdout is the protocol), no floating promises,
// no import cycles, imports point downward only (the layers of docs/ARCHITECTURE.md), files under 600 lines and
// functions under 80 (issue 27).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import importX, { createNodeResolver } from "eslint-plugin-import-x";

/**
 * The layers of src/ and protocol/, highest first (docs/ARCHITECTURE.md, "Layers"). A file may import from its own
 * layer and the layers below it, never from one above (import-x/no-restricted-paths, one zone per layer). Within a
 * layer any direction is allowed; import-x/no-cycle keeps it acyclic.
 */
const LAYERS = [
  { name: "cli", paths: ["./src/cli.ts", "./src/main.ts"] },
  { name: "commands", paths: ["./src/commands"] },
  { name: "dashboard", paths: ["./src/ui"] },
  { name: "clients", paths: ["./src/operator", "./src/demo.ts", "./src/transcripts", "./src/host-kit"] },
  { name: "server", paths: ["./src/server"] },
  { name: "adapters", paths: ["./src/adapters", "./src/cli-kit", "./src/package-files.ts"] },
  { name: "core", paths: ["./src/core"] },
  { name: "protocol", paths: ["./protocol"] },
];

/** One zone per layer: its files may not import any file of a layer above it. */
const UPWARD_IMPORT_ZONES = LAYERS.slice(1).map((layer, index) => ({
  target: layer.paths,
  from: LAYERS.slice(0, index + 1).flatMap((above) => above.paths),
  message: `The ${layer.name} layer imports only from its own layer and those below it (docs/ARCHITECTURE.md, Layers).`,
}));

// LangGraph.js is the benchmark's peer (test/bench/langgraph-case.ts, issue 16): a devDependency, never product code.
const LANGGRAPH_ONLY_IN_BENCH = {
  group: ["@langchain/*"],
  message: "LangGraph.js is a benchmark-only devDependency (test/bench); the product never imports it.",
};

/** Issue 27: the shape of src/core/product and src/core/goal (composition, docs/ARCHITECTURE.md). */
const CORE_SHAPE =
  "src/core/product and src/core/goal compose collaborators: no class extends another, no protected, no module-level let/var.";

/** pino is bundled (scripts/bundle.ts): a transport starts a worker on a file found through `__dirname`, which a bundle lacks. */
const PINO_TRANSPORT =
  "pino is bundled: a transport cannot find its worker file; log through a synchronous pino.destination.";

export default tseslint.config(
  {
    ignores: [
      "vitest.config.ts",
      "vitest.agents.config.ts",
      "dist/**",
      "node_modules/**",
      "coverage/**",
      "**/*.js",
      "**/*.cjs",
      "**/*.mjs",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { project: ["./tsconfig.json"], tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "import-x": importX },
    // Resolves `./x.js` to the `./x.ts` beside it (NodeNext imports name the compiled file): without it import-x
    // cannot follow a relative import, and no-cycle and no-restricted-paths see nothing. import-x reads the imports
    // of a file it follows only for the extensions listed, with the parser named: without `.ts` there, no-cycle read
    // no file of ours (a two-file cycle passed) and spent its ~35 s in node_modules' `.js` files. A cycle cannot pass
    // through a package (none imports our files), so no-cycle skips external modules.
    settings: {
      "import-x/resolver-next": [createNodeResolver({ extensionAlias: { ".js": [".ts", ".js"] } })],
      "import-x/extensions": [".ts", ".js"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
    },
  },
  {
    files: ["src/**/*.ts", "protocol/**/*.ts"],
    rules: { "import-x/no-restricted-paths": ["error", { zones: UPWARD_IMPORT_ZONES }] },
  },
  {
    // Size limits (STYLE.md, "Size and shape"). Blank lines and comments count: a file is read whole, docstrings
    // included, and a limit that skipped them would let a file grow without bound in prose.
    files: ["src/**/*.ts"],
    rules: { "max-lines": ["error", { max: 600, skipBlankLines: false, skipComments: false }] },
  },
  {
    // Every function in src/ is within 80 lines with no exception (the last ones were split in issues 27 and 34).
    files: ["src/**/*.ts"],
    rules: {
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: false, skipComments: false, IIFEs: true }],
    },
  },
  {
    files: ["src/**/*.ts", "protocol/**/*.ts"],
    rules: {
      "no-console": "error",
      "no-restricted-imports": [
        "error",
        {
          patterns: [LANGGRAPH_ONLY_IN_BENCH],
          paths: [{ name: "pino", importNames: ["transport"], message: PINO_TRANSPORT }],
        },
      ],
      // pino is bundled (scripts/bundle.ts): a transport's worker file cannot be found from the bundle.
      "no-restricted-properties": ["error", { object: "pino", property: "transport", message: PINO_TRANSPORT }],
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.name='pino'] Property[key.name='transport']", message: PINO_TRANSPORT },
      ],
    },
  },
  {
    // Issue 27: the product and goal cores are composed, never inherited: no class extends another, nothing is
    // `protected`, no module-level mutable state (scripts/core-shape.ts prints the counts in `npm run lint`).
    files: ["src/core/product/**/*.ts", "src/core/goal/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.name='pino'] Property[key.name='transport']", message: PINO_TRANSPORT },
        { selector: "ClassDeclaration[superClass], ClassExpression[superClass]", message: CORE_SHAPE },
        { selector: "[accessibility='protected']", message: CORE_SHAPE },
        { selector: "Program > VariableDeclaration[kind!='const']", message: CORE_SHAPE },
        { selector: "Program > ExportNamedDeclaration > VariableDeclaration[kind!='const']", message: CORE_SHAPE },
      ],
    },
  },
  {
    files: ["src/core/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["node:*", "vscode-jsonrpc", "vscode-jsonrpc/*", "pino", "better-sqlite3"],
              message: "The core imports no I/O (DESIGN.md, Layers).",
            },
            LANGGRAPH_ONLY_IN_BENCH,
          ],
        },
      ],
    },
  },
);
