/**
 * What a fleet server does when it hears of another server's lease (issue 32/34, figure 9: per-task CPU grew with the
 * number of servers). Every lease write used to start a whole recovery pass on every other server running
 * `--recover` (every executing header, then every lease of the products it does not drive), so a fleet of N servers
 * read O(N) records per product each time any product started or finished. Now a written lease starts nothing (its
 * writer was live to write it), and a released one costs one header read of that product; a product released while
 * still `executing` (its server stopped) is still taken over at once, without waiting for the scan period. The
 * release of a finished product is not announced at all (`delete` with `announce: false`): it cost every other
 * server of the fleet that header read, N-1 reads per product for N servers, to find nothing to recover.
 *
 * Two services on one memory authority stand for two servers; the test's feed delivers one server's lease writes
 * and deletes to the other's watcher, as PostgreSQL's change feed does (`deleted` set on a delete; a delete with
 * `announce: false` is not delivered).
 */
import { afterEach, describe, expect, it } from "vitest";
import type { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { MemoryAuthority as Memory } from "../../../src/adapters/persistence/memory-authority.js";
import type { AuthorityChange, DeleteOptions } from "../../../src/core/ports.js";
import { Fleet } from "../../../src/core/product/fleet.js";
import {
  FakeClock,
  Gate,
  createHarness,
  draftPlan,
  sequentialIds,
  waitUntil,
  type Harness,
} from "../../support/fakes.js";

/** The reads one server made through its view of the shared authority, as `method kind id`. */
type Reads = string[];

/** Every lease change the test's feed delivered, in order. */
const delivered: AuthorityChange[] = [];

/**
 * A view of `shared` for the server `writer`: reads are recorded in `reads`, and its lease puts and deletes are
 * delivered to every other view's watchers (`deleted: true` for a delete that removed the record; not a delete
 * with `announce: false`).
 */
function feedView(
  shared: MemoryAuthority,
  writer: string,
  watchers: Map<string, Set<(change: AuthorityChange) => void>>,
  reads: Reads,
): MemoryAuthority {
  const announce = (change: AuthorityChange): void => {
    delivered.push(change);
    for (const [who, listeners] of watchers) if (who !== writer) for (const l of listeners) l(change);
  };
  return new Proxy(shared, {
    get(target, prop) {
      if (prop === "watch") {
        return (listener: (change: AuthorityChange) => void) => {
          const mine = watchers.get(writer) ?? new Set();
          watchers.set(writer, mine.add(listener));
          return () => mine.delete(listener);
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]) => {
        if (prop === "get" || prop === "list" || prop === "listAcrossProjects") reads.push(args.slice(0, 3).join(" "));
        const result = await method.apply(target, args);
        const [projectId, kind, id] = args as [string, string, string];
        const quiet = prop === "delete" && (args[4] as DeleteOptions | undefined)?.announce === false;
        if (kind === "lease" && !quiet && (prop === "put" || (prop === "delete" && result === true))) {
          announce({ projectId, kind, id, ...(prop === "delete" ? { deleted: true as const } : {}) });
        }
        return result;
      };
    },
  });
}

interface TwoServers {
  owner: Harness;
  survivor: Harness;
  fleet: Fleet;
  survivorReads: Reads;
  clock: FakeClock;
}

let stop: (() => Promise<void>) | null = null;
afterEach(async () => {
  await stop?.();
  stop = null;
  delivered.length = 0;
});

/** An owner server and a survivor running the fleet with `--recover` (its periodic scan far away). */
async function twoServers(): Promise<TwoServers> {
  const shared = new Memory();
  const watchers = new Map<string, Set<(change: AuthorityChange) => void>>();
  const clock = new FakeClock();
  const ids = sequentialIds();
  const plan = draftPlan([{ id: "a" }, { id: "b" }]);
  const survivorReads: Reads = [];
  const owner = createHarness({
    plan,
    clock,
    ids,
    authority: feedView(shared, "owner", watchers, []),
    options: { ownerId: "owner" },
  });
  const survivor = createHarness({
    plan,
    clock,
    ids,
    authority: feedView(shared, "survivor", watchers, survivorReads),
    options: { ownerId: "survivor" },
  });
  const fleet = new Fleet({
    ...{ service: survivor.service, store: survivor.store, authority: survivor.authority, clock, ids },
    ...{ logger: survivor.logger, ownerId: "survivor", recover: true, scanMs: 3_600_000 },
  });
  fleet.start();
  clock.advance(0); // the start-up pass
  await waitUntil(() => survivor.logger.entries.some((e) => e.msg === "recovery pass done"), "the start-up pass");
  stop = async () => {
    await fleet.stop();
    await owner.service.shutdown();
    await survivor.service.shutdown();
  };
  return { owner, survivor, fleet, survivorReads, clock };
}

describe("a fleet server hearing of another server's lease", () => {
  it("reads nothing, and runs no recovery pass, when another server's product starts and completes", async () => {
    const { owner, survivorReads, clock } = await twoServers();
    survivorReads.length = 0;
    const productId = await owner.started();
    await owner.finished(productId);
    // The owner releases the lease once the product completed (the owner's reads are not recorded).
    while ((await owner.authority.get("proj", "lease", productId)) !== null) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    // A release would be checked after a jitter of at most 250 ms (the fake clock's).
    clock.advance(300);
    await new Promise((resolve) => setImmediate(resolve));
    expect(delivered).toEqual([{ projectId: "proj", kind: "lease", id: productId }]);
    expect(survivorReads).toEqual([]);
  });

  it("reads one header when a paused product's lease is released (only a finished product's is not announced)", async () => {
    const { owner, survivorReads, clock } = await twoServers();
    const hold = new Gate();
    owner.worker.script("a", { kind: "complete", gate: hold });
    const productId = await owner.started();
    await waitUntil(() => owner.worker.hasStarted("a"), "task a to start on the owner");
    survivorReads.length = 0;
    const paused = owner.service.pause(productId);
    hold.release();
    await paused;
    await waitUntil(() => delivered.some((c) => c.deleted === true), "the paused product's release to be announced");
    clock.advance(300);
    await waitUntil(() => survivorReads.includes(`proj product ${productId}`), "the survivor's header read");
    expect(survivorReads).toEqual([`proj product ${productId}`]);
  });

  it("takes over at once a product whose lease was released while it still executes", async () => {
    const { owner, survivor, clock } = await twoServers();
    const hold = new Gate();
    owner.worker.script("a", { kind: "complete", gate: hold });
    const productId = await owner.started();
    await waitUntil(() => owner.worker.hasStarted("a"), "task a to start on the owner");
    await owner.service.shutdown(); // releases the lease; the product stays `executing`
    hold.release();
    clock.advance(300);
    await waitUntil(
      () => survivor.service.loaded().some((o) => o.productId === productId && o.isDriving),
      "the survivor to take the product over",
    );
    await survivor.finished(productId);
    expect(survivor.logger.entries.filter((e) => e.msg === "recovered a product whose owner is gone")).toHaveLength(1);
  });
});
