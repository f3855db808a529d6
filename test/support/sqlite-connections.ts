/**
 * Test support for "several servers on one SQLite file" at core level: real `SqliteAuthority` connections to one
 * temporary file, two product services on them (a reader and a driver, as two server processes), and an authority
 * that forwards every call to a connection so that a test can override only the calls it watches or breaks.
 *
 * Owns the temporary folder it makes (removed by the cleanup it registers); never touches anything else.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import type { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import type { DraftPlan, RecordInfo, RunStateAuthority, StoredEvent, StoredRecord } from "../../src/core/ports.js";
import { createHarness, type Harness } from "./fakes.js";

/**
 * `n` connections to one new SQLite file in a new temporary folder, as `n` server processes have. Pushes onto
 * `cleanup` the closing of each connection and the removal of the folder (run it in reverse order, after the test).
 */
export function sqliteConnections(
  n: number,
  cleanup: (() => unknown)[],
  prefix = "sqlite-connections-",
): SqliteAuthority[] {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, "state.db");
  const connections = Array.from({ length: n }, () => SqliteAuthority.open(file));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanup.push(...connections.map((c) => () => c.close()));
  return connections;
}

/** Forwards every call, `changeMark` included, to `inner`; subclasses override what they count or make fail. */
export class ForwardingAuthority implements RunStateAuthority {
  readonly name: string;
  constructor(readonly inner: SqliteAuthority) {
    this.name = inner.name;
  }
  changeMark(): string {
    return this.inner.changeMark();
  }
  get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.inner.get(projectId, kind, id);
  }
  put(projectId: string, kind: string, id: string, value: object, expected: number | null) {
    return this.inner.put(projectId, kind, id, value, expected);
  }
  delete(projectId: string, kind: string, id: string, expected?: number): Promise<boolean> {
    return this.inner.delete(projectId, kind, id, expected);
  }
  list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    return this.inner.list(projectId, kind, prefix);
  }
  appendEvents(projectId: string, stream: string, events: object[], expectedSeq: number) {
    return this.inner.appendEvents(projectId, stream, events, expectedSeq);
  }
  readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.inner.readEvents(projectId, stream, afterSeq, limit);
  }
  deleteStream(projectId: string, stream: string): Promise<boolean> {
    return this.inner.deleteStream(projectId, stream);
  }
  pruneEvents(projectId: string, stream: string, beforeSeq: number, afterSeq?: number): Promise<number> {
    return this.inner.pruneEvents(projectId, stream, beforeSeq, afterSeq);
  }
  listProjects(): Promise<string[]> {
    return this.inner.listProjects();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Two servers on one SQLite file: `reader` (owner "A") on `a`, `driver` (owner "B") on `b`, sharing clock and ids. */
export interface TwoServers<A extends RunStateAuthority> {
  a: A;
  b: SqliteAuthority;
  reader: Harness;
  driver: Harness;
}

/**
 * Two product services on two connections to one new SQLite file, both planning `plan` (see `TwoServers`); `wrap`
 * puts an authority of the test's own (a `ForwardingAuthority`) between the reader and its connection. Pushes the
 * services' shutdown and the connections' cleanup onto `cleanup`.
 */
export function twoServersOnOneFile<A extends RunStateAuthority = SqliteAuthority>(
  cleanup: (() => unknown)[],
  plan: DraftPlan,
  wrap: (connection: SqliteAuthority) => A = (connection) => connection as unknown as A,
): TwoServers<A> {
  const [first, b] = sqliteConnections(2, cleanup) as [SqliteAuthority, SqliteAuthority];
  const a = wrap(first);
  const reader = createHarness({ plan, authority: a as unknown as MemoryAuthority, options: { ownerId: "A" } });
  const driver = createHarness({
    plan,
    authority: b as unknown as MemoryAuthority,
    clock: reader.clock,
    ids: reader.ids,
    options: { ownerId: "B" },
  });
  cleanup.push(
    () => driver.service.shutdown(),
    () => reader.service.shutdown(),
  );
  return { a, b, reader, driver };
}
