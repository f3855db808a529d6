/**
 * The group commit queue (postgres-group-commit.ts, issue 32) with scripted statements, no database: writes asked for
 * together share one statement, two writes of one key never do, at most one statement is in flight (or as many as
 * the queue is given, a key never in two of them at once), a batch rolled back for its data, by a deadlock, past a
 * limit or on a lock (SQLSTATE class 22, 23, 40, 54, 55) is sent again write by write so only the one at fault
 * fails, any other error fails the whole batch, and `drained` waits for everything queued.
 */
import { describe, expect, it } from "vitest";
import { GroupCommit, MAX_BATCH, MAX_BATCH_BYTES } from "../../../src/adapters/persistence/postgres-group-commit.js";

interface Write {
  key: string;
  value: number;
}

/** Scripted statements: records each statement, answers `value * 10` per write unless told to fail. */
function scripted(o: { failTogether?: unknown; failAlone?: (w: Write) => unknown } = {}) {
  const statements: string[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const run = async <T>(label: string, answer: () => T): Promise<T> => {
    statements.push(label);
    inFlight += 1;
    mostInFlight = Math.max(mostInFlight, inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    inFlight -= 1;
    return answer();
  };
  const group = new GroupCommit<Write, number>({
    key: (w) => w.key,
    alone: (w) =>
      run(`alone ${w.key}`, () => {
        const error = o.failAlone?.(w);
        if (error) throw error;
        return w.value * 10;
      }),
    together: (ws) =>
      run(`together ${ws.map((w) => w.key).join(",")}`, () => {
        if (o.failTogether) throw o.failTogether;
        return ws.map((w) => w.value * 10);
      }),
  });
  return { group, statements, mostInFlight: () => mostInFlight };
}

const outcomes = (settled: PromiseSettledResult<number>[]): unknown[] =>
  settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as { code?: string }).code));

describe("GroupCommit", () => {
  it("sends writes asked for together as one statement, one key at most once, one statement in flight", async () => {
    const s = scripted();
    const writes = ["a", "b", "a", "c"].map((key, i) => s.group.submit({ key, value: i }));
    expect(outcomes(await Promise.allSettled(writes))).toEqual([0, 10, 20, 30]);
    expect(s.statements).toEqual(["together a,b,c", "alone a"]);
    expect(s.mostInFlight()).toBe(1);
  });

  it(`sends at most ${MAX_BATCH} writes in one statement`, async () => {
    const s = scripted();
    await Promise.all(Array.from({ length: MAX_BATCH + 2 }, (_, i) => s.group.submit({ key: `k${i}`, value: i })));
    expect(s.statements.map((t) => t.split(",").length)).toEqual([MAX_BATCH, 2]);
  });

  it("sends a batch rolled back (22, 23, 40, 54, 55) again write by write: only the write at fault fails", async () => {
    for (const code of ["22001", "23505", "40P01", "54000", "55P03"]) {
      const s = scripted({
        failTogether: Object.assign(new Error("refused"), { code }),
        failAlone: (w) => (w.key === "b" && code !== "40P01" ? Object.assign(new Error("bad"), { code }) : undefined),
      });
      const settled = await Promise.allSettled(["a", "b", "c"].map((key, i) => s.group.submit({ key, value: i })));
      expect(outcomes(settled)).toEqual([0, code === "40P01" ? 10 : code, 20]);
      expect(s.statements).toEqual(["together a,b,c", "alone a", "alone b", "alone c"]);
    }
  });

  it("fails every write of a batch with any other error (connection lost, timeout), and goes on afterwards", async () => {
    const s = scripted({ failTogether: Object.assign(new Error("Connection terminated"), { code: undefined }) });
    const settled = await Promise.allSettled(["a", "b"].map((key, i) => s.group.submit({ key, value: i })));
    expect(settled.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(s.statements).toEqual(["together a,b"]);
    expect(await s.group.submit({ key: "a", value: 7 })).toBe(70);
  });

  it("resolves drained only once every write queued before it has its outcome", async () => {
    const s = scripted();
    await s.group.drained();
    const settledAt: string[] = [];
    const writes = ["a", "a", "b"].map((key, i) =>
      s.group.submit({ key, value: i }).then(() => settledAt.push(`${key}${i}`)),
    );
    await s.group.drained();
    expect(settledAt.sort()).toEqual(["a0", "a1", "b2"]);
    await Promise.all(writes);
  });

  it("keeps at most maxInFlight statements in flight, and never a key in two of them at once", async () => {
    const statements: string[] = [];
    const gates: (() => void)[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const run = async (label: string, values: number[]): Promise<number[]> => {
      statements.push(label);
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      await new Promise<void>((resolve) => gates.push(resolve));
      inFlight -= 1;
      return values.map((v) => v * 10);
    };
    const group = new GroupCommit<Write, number>(
      {
        key: (w) => w.key,
        alone: async (w) => (await run(`alone ${w.key}`, [w.value]))[0] as number,
        together: (ws) =>
          run(
            `together ${ws.map((w) => w.key).join(",")}`,
            ws.map((w) => w.value),
          ),
      },
      2,
    );
    const tick = async (n: number): Promise<void> => {
      while (statements.length < n) await new Promise((resolve) => setImmediate(resolve));
    };
    const first = [group.submit({ key: "a", value: 0 }), group.submit({ key: "b", value: 1 })];
    await tick(1);
    // While "a,b" is in flight: c goes at once in a second statement; a waits for its key.
    const second = [group.submit({ key: "a", value: 2 }), group.submit({ key: "c", value: 3 })];
    await tick(2);
    const third = group.submit({ key: "d", value: 4 }); // both slots taken: waits
    for (let i = 0; i < 10; i += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(statements).toEqual(["together a,b", "alone c"]);
    gates.shift()?.(); // "a,b" ends: a and d go together
    await tick(3);
    expect(statements[2]).toBe("together a,d");
    while (gates.length > 0) {
      gates.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await Promise.all([...first, ...second, third])).toEqual([0, 10, 20, 30, 40]);
    expect(mostInFlight).toBe(2);
    await group.drained();
  });

  it(`keeps a statement of several writes within ${MAX_BATCH_BYTES} bytes, and one key's writes in order`, async () => {
    const statements: string[] = [];
    const group = new GroupCommit<Write, number>({
      key: (w) => w.key,
      bytes: (w) => w.value,
      alone: async (w) => {
        statements.push(`alone ${w.key}`);
        return w.value;
      },
      together: async (ws) => {
        statements.push(`together ${ws.map((w) => w.key).join(",")}`);
        return ws.map((w) => w.value);
      },
    });
    const mb = 1024 * 1024;
    const sizes: [string, number][] = [
      ["x", 6 * mb],
      ["y", 3 * mb], // past the limit with x: waits, and holds y back
      ["y", 1], // small enough, but never before the y asked for first
      ["z", mb],
      ["w", MAX_BATCH_BYTES + 1], // larger than the limit: alone, whatever is queued with it
    ];
    const done = await Promise.all(sizes.map(([key, value]) => group.submit({ key, value })));
    expect(done).toEqual(sizes.map(([, value]) => value));
    expect(statements).toEqual(["together x,z", "alone y", "alone y", "alone w"]);
  });

  it("fills every free slot at once when more than one statement's worth of writes is waiting", async () => {
    const sizes: number[] = [];
    const gates: (() => void)[] = [];
    const group = new GroupCommit<Write, number>(
      {
        key: (w) => w.key,
        alone: async (w) => w.value,
        together: async (ws) => {
          sizes.push(ws.length);
          await new Promise<void>((resolve) => gates.push(resolve));
          return ws.map((w) => w.value);
        },
      },
      2,
    );
    const writes = Array.from({ length: MAX_BATCH + 4 }, (_, i) => group.submit({ key: `k${i}`, value: i }));
    // Neither statement ends until released: the second is sent while the first is still in flight, or never.
    for (let i = 0; i < 50 && sizes.length < 2; i += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(sizes).toEqual([MAX_BATCH, 4]);
    for (const release of gates.splice(0)) release();
    expect(await Promise.all(writes)).toHaveLength(MAX_BATCH + 4);
  });
});
