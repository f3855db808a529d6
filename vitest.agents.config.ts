import { defineConfig } from "vitest/config";

// The real-agent suite (issue 11): published ACP agents against the fake model server in test/agents/support.
// Run with `npm run test:agents` (scripts/test-agents.sh: loopback-only network namespace when possible). Agents take
// seconds to start on a loaded machine: generous timeouts; files run one at a time to keep the load bounded.
export default defineConfig({
  test: {
    include: ["test/agents/**/*.test.ts"],
    testTimeout: 240_000,
    hookTimeout: 60_000,
    pool: "forks",
    fileParallelism: false,
  },
});
