// Lint rules that guard the project's invariants: no console in src/ (stdout is the protocol),
// no floating promises, no import cycles.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import importX from "eslint-plugin-import-x";

// LangGraph.js is the benchmark's peer (test/bench/langgraph-case.ts, issue 16): a devDependency, never product code.
const LANGGRAPH_ONLY_IN_BENCH = {
  group: ["@langchain/*"],
  message: "LangGraph.js is a benchmark-only devDependency (test/bench); the product never imports it.",
};

/** pino is bundled (scripts/bundle.ts): a transport starts a worker on a file found through `__dirname`, which a bundle lacks. */
const PINO_TRANSPORT = "pino is bundled: a transport cannot find its worker file; log through a synchronous pino.destination.";

export default tseslint.config(
  { ignores: ["vitest.config.ts", "vitest.agents.config.ts", "dist/**", "node_modules/**", "coverage/**", "**/*.js", "**/*.cjs", "**/*.mjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { project: ["./tsconfig.json"], tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "import-x": importX },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "import-x/no-cycle": "error",
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
    files: ["src/core/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["node:*", "vscode-jsonrpc", "vscode-jsonrpc/*", "pino", "better-sqlite3"], message: "The core imports no I/O (DESIGN.md, Layers)." },
            { group: ["../server/*", "../adapters/*", "../../server/*", "../../adapters/*", "../cli*"], message: "Imports point downwards only (DESIGN.md, Layers)." },
            LANGGRAPH_ONLY_IN_BENCH,
          ],
        },
      ],
    },
  },
);
