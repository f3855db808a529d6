// Owner ids and liveness verdicts from real processes on this host (DESIGN.md guarantee 13): a process that exited,
// or whose pid now has another start time, is dead; a running or stopped (SIGSTOP) one is alive; another host, boot
// or pid namespace, or an id of another format, is unknown.
import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessLiveness, parseProcStat } from "../../../src/adapters/system/process-liveness.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/** A real process that runs until killed; resolves once it is running. */
async function sleeper(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  children.push(child);
  await new Promise((resolve) => child.once("spawn", resolve));
  return child;
}

/** The owner id `pid` would have had, made the way the server makes its own (same host and scope). */
function ownerIdOf(pid: number): string {
  const me = new ProcessLiveness();
  return new ProcessLiveness(undefined, { pid, host: me.identity.host, scope: me.identity.scope }).ownerId;
}

describe("ProcessLiveness", () => {
  const liveness = new ProcessLiveness();

  it("makes owner ids of host, pid, process start time and scope", () => {
    const parsed = ProcessLiveness.parse(liveness.ownerId);
    expect(parsed).toMatchObject({ pid: process.pid, host: liveness.identity.host });
    expect(parsed?.start).toMatch(/^[1-9]\d*$/);
  });

  it("knows itself alive", () => {
    expect(liveness.check(liveness.ownerId)).toBe("alive");
  });

  it("sees a running process alive, a stopped one still alive, and a killed one dead", async () => {
    const child = await sleeper();
    const id = ownerIdOf(child.pid as number);
    expect(liveness.check(id)).toBe("alive");

    child.kill("SIGSTOP");
    expect(liveness.check(id)).toBe("alive");

    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(liveness.check(id)).toBe("dead");
  });

  it("sees a pid that now belongs to a process started at another time as dead", async () => {
    const child = await sleeper();
    const parsed = ProcessLiveness.parse(ownerIdOf(child.pid as number));
    const earlier = `${parsed?.host}:${parsed?.pid}:${Number(parsed?.start) - 1}:${parsed?.scope}`;

    expect(liveness.check(earlier)).toBe("dead");
  });

  it("proves nothing about another host, another scope, or an id of another format", async () => {
    const child = await sleeper();
    const parsed = ProcessLiveness.parse(ownerIdOf(child.pid as number));

    expect(liveness.check(`elsewhere:${parsed?.pid}:${parsed?.start}:${parsed?.scope}`)).toBe("unknown");
    expect(liveness.check(`${parsed?.host}:999999:${parsed?.start}:0000beef`)).toBe("unknown");
    expect(liveness.check("drift-owner")).toBe("unknown");
    expect(liveness.check(`${parsed?.host}:${parsed?.pid}:abcd1234`)).toBe("unknown");
  });

  it("reads the start time after the command name, even one with spaces and parentheses", () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[0] = "S";
    expect(parseProcStat(`42 (a (b) c) ${fields.join(" ")}`)).toEqual({ state: "S", start: "22" });
  });
});
