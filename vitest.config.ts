import { defineConfig } from "vitest/config";

/**
 * Test files that measure or depend on timing under a tight bound (fleet takeover and fencing, liveness, memory and
 * heap bounds, kill -9 windows, very large repositories) or that load the machine on purpose (prepare-concurrency's
 * CPU burners). They run after the others, one file at a time, so that nothing of this suite competes with them for
 * the machine's two cores. A file without such a bound runs in the parallel project: the serial one runs one file at
 * a time, so each second there is a second of CI. Moved out for that reason: postgres-server, the transcript corpus
 * and worktree-safety cases 1-5 and 7 (no time bound); host-check-deadline (it waits 30 s for a 30 s deadline, with 5 s
 * to spare) and dashboard-backpressure (60 s of clients that never read; its bounds are on memory, not time).
 */
const SERIAL = [
  "test/e2e/postgres-fleet.test.ts",
  "test/e2e/postgres-liveness.test.ts",
  "test/e2e/postgres-outage.test.ts",
  "test/e2e/postgres-partition.test.ts",
  "test/e2e/postgres-remote-fleet.test.ts",
  "test/e2e/owner-liveness.test.ts",
  "test/e2e/host-hostile.test.ts",
  "test/e2e/memory-bound.test.ts",
  "test/e2e/verify-kill.test.ts",
  "test/e2e/worktree-safety-bigchange.test.ts",
  "test/e2e/worktree-safety-prepare.test.ts",
  "test/e2e/guarantees.test.ts",
  "test/adapters/workspace/prepare-concurrency.test.ts",
  "test/adapters/system/heap-growth.test.ts",
  "test/adapters/persistence/memory-authority-flat.test.ts",
];
const EXCLUDE = ["test/bench/**", "test/agents/**", "node_modules/**", "dist/**"];

export default defineConfig({
  test: {
    // Generous: e2e tests drive real servers, agents and git, and take 20-30 s on a busy 2-core machine; a limit is
    // a backstop for a hang, never a measure (each test waits for its own events with its own bounds).
    testTimeout: 90_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        // Two files at a time: most of this suite waits on subprocesses (servers, git, agents), not on a core.
        test: { name: "parallel", include: ["test/**/*.test.ts"], exclude: [...EXCLUDE, ...SERIAL], maxWorkers: 2 },
      },
      {
        extends: true,
        test: {
          name: "serial",
          include: SERIAL,
          exclude: EXCLUDE,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
