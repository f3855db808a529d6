/**
 * Regression (issue 10 follow-up, found by an adversarial test of the fleet): a released lease's record is deleted, so
 * a later holding starts at revision 1 again. ProductLease trusted the revision alone:
 * 1. a frozen ex-holder whose held revision equalled the new record's "renewed" it by CAS and took a live owner's
 *    lease (guarantee 13: the live owner was then fenced by its own heartbeat);
 * 2. a server that had seen revision 1 of an earlier holding believed a brand-new lease at revision 1 had expired at
 *    once (its "first seen" time was keyed by revision) and took a live owner's product over.
 * Both now fail without the fix (owner check before the renewal's CAS; first-seen keyed by the whole record).
 */
import { expect, it } from "vitest";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { isDomainError } from "../../../src/core/errors.js";
import { ProductLease, type LeaseLoss } from "../../../src/core/product/lease.js";
import { ProductStore } from "../../../src/core/product/store.js";
import { FakeClock, RecordingLogger } from "../../support/fakes.js";

const TTL = 30_000;

function lease(store: ProductStore, clock: FakeClock, owner: string, losses: LeaseLoss[] = []): ProductLease {
  return new ProductLease(
    store,
    clock,
    new RecordingLogger(),
    "proj",
    "prd_1",
    { owner, ttlMs: TTL, renewMs: 10_000 },
    (l) => losses.push(l),
  );
}

it("a frozen ex-holder whose revision matches a new holding loses its lease instead of taking the live one", async () => {
  const authority = new MemoryAuthority();
  const store = new ProductStore(authority, 3);
  const frozenClock = new FakeClock();
  const clock = new FakeClock();
  const lossesA: LeaseLoss[] = [];
  const a = lease(store, frozenClock, "server-a", lossesA);
  const b = lease(store, clock, "server-b");
  const d = lease(store, clock, "server-d");
  await a.acquire(); // revision 1; then A freezes (its clock and heartbeat stand still)
  await b.holder(); // B sees revision 1 …
  clock.advance(TTL + 1); // … and after a lifetime without renewal it is expired for B
  await b.acquire(); // revision 2: B took the product over
  await b.release(); // B paused it: the record is deleted
  await d.acquire(); // D resumes it: a new record, revision 1 again
  await a.renewNow(); // A wakes: its heartbeat tries to renew "its" revision 1
  const record = await authority.get("proj", "lease", "prd_1");
  expect({
    recordOwner: (record?.value as { owner: string }).owner,
    aHolds: a.held,
    aLosses: lossesA.map((l) => l.kind),
    dHolds: d.held,
  }).toEqual({ recordOwner: "server-d", aHolds: false, aLosses: ["taken"], dHolds: true });
});

it("a server that saw an earlier holding at revision 1 respects a brand-new live lease at revision 1", async () => {
  const authority = new MemoryAuthority();
  const store = new ProductStore(authority, 3);
  const clock = new FakeClock();
  const x = lease(store, clock, "server-x");
  const b = lease(store, clock, "server-b");
  const d = lease(store, clock, "server-d");
  await x.acquire(); // revision 1
  await b.holder(); // B looks at it once (product.status, a recovery scan, a refused resume …)
  await x.release(); // X pauses it: deleted
  clock.advance(TTL + 1); // later …
  await d.acquire(); // D resumes it: revision 1 again, expires TTL from now
  const verdict = await b.holder();
  const refused = await b.acquire().then(
    () => false,
    () => true,
  );
  const record = await authority.get("proj", "lease", "prd_1");
  expect({ liveForB: verdict?.live, refused, recordOwner: (record?.value as { owner: string }).owner }).toEqual({
    liveForB: true,
    refused: true,
    recordOwner: "server-d",
  });
});

it("taking a held lease whose renewal the authority fails is a persistence failure, not another owner's conflict", async () => {
  // Seen over stdio (durability-findings, the state file unlinked): a resume while the paused product still held its
  // lease renewed it, the write failed, and the client was told -32012 (another owner) instead of -32013.
  const authority = new MemoryAuthority();
  const store = new ProductStore(authority, 3);
  const losses: LeaseLoss[] = [];
  const a = lease(store, new FakeClock(), "server-a", losses);
  await a.acquire();
  authority.failNext("put");
  const err = await a.acquire().catch((e: unknown) => e);
  expect(isDomainError(err, "persistence_failed")).toBe(true);
  expect(losses.map((l) => l.kind)).toEqual(["failed"]);
  expect(a.held).toBe(false);
});
