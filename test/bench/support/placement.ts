/**
 * Benchmark support: where the client and a process under test run (issue 16, figure 2). A round trip between two
 * processes costs very different amounts depending on whether the kernel runs them on one core (a direct switch) or
 * on two (a wake-up of the other core, which on these virtual machines is several times dearer), and the scheduler
 * chooses differently for a small echo than for the server. So the sequential figure is measured in fixed placements,
 * the same for both processes, with `taskset` (util-linux): the client's main thread and all threads of the process.
 *
 * Owns pinning, reading where a thread last ran and how much CPU a process used; never starts or stops a process.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** A placement of the client (this process's main thread) and the process under test. */
export interface Placement {
  /** `one core`: both on the first CPU; `two cores`: client on the first, process on the second; `scheduler`: not pinned. */
  name: "one core" | "two cores" | "scheduler";
  client: number | undefined;
  child: number | undefined;
}

/** The CPUs this process may run on (its affinity list), or undefined without `taskset`. */
function allowedCpus(): number[] | undefined {
  try {
    const out = execFileSync("taskset", ["-pc", String(process.pid)], { encoding: "utf8" });
    const list = out.slice(out.lastIndexOf(":") + 1).trim();
    const cpus: number[] = [];
    for (const part of list.split(",")) {
      const [from, to] = part.split("-").map(Number) as [number, number | undefined];
      for (let c = from; c <= (to ?? from); c += 1) cpus.push(c);
    }
    return cpus.length > 0 && cpus.every(Number.isInteger) ? cpus : undefined;
  } catch {
    return undefined;
  }
}

const ALLOWED = allowedCpus();

/** The placements this machine can measure: all three with `taskset` and at least two CPUs, else `scheduler` only. */
export function placements(): Placement[] {
  const scheduler: Placement = { name: "scheduler", client: undefined, child: undefined };
  if (ALLOWED === undefined || ALLOWED.length < 2) return [scheduler];
  const [first, second] = ALLOWED as [number, number];
  return [
    { name: "one core", client: first, child: first },
    { name: "two cores", client: first, child: second },
    scheduler,
  ];
}

/** The placement with that name, when this machine can measure it. */
export function placement(name: Placement["name"]): Placement | undefined {
  return placements().find((p) => p.name === name);
}

function cpuList(cpu: number | undefined): string {
  return cpu === undefined ? (ALLOWED ?? []).join(",") : String(cpu);
}

/**
 * Pins this process's main thread to `placement.client` and every thread of each of `pids` to `placement.child`, or
 * back to every allowed CPU for `scheduler`. Threads a process starts later inherit its main thread's affinity.
 */
export function pin(p: Placement, pids: readonly number[]): void {
  if (ALLOWED === undefined) return;
  execFileSync("taskset", ["-pc", cpuList(p.client), String(process.pid)], { stdio: "ignore" });
  for (const pid of pids) execFileSync("taskset", ["-apc", cpuList(p.child), String(pid)], { stdio: "ignore" });
}

/** The CPU the main thread of `pid` last ran on (`/proc/<pid>/stat`, field 39), or undefined. */
export function lastCpu(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start at the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpu = Number(fields[36]);
    return Number.isInteger(cpu) ? cpu : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU time used so far by every thread of `pid`, in nanoseconds (the first field of `/proc/<pid>/task/<tid>/schedstat`:
 * time spent running, user and kernel alike), or undefined where /proc has no schedstat. Threads that already ended
 * are not counted, so take it around work while the process lives.
 */
export function cpuNs(pid: number): number | undefined {
  try {
    let total = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return Number.isFinite(total) ? total : undefined;
  } catch {
    return undefined;
  }
}
