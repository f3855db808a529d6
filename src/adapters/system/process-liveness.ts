/**
 * Process identity and liveness for product leases (DESIGN.md guarantee 13, PROTOCOL.md section 5 "Ownership").
 *
 * Owns the format of the owner ids this server writes into leases — `<hostname>:<pid>:<start>:<scope>`, where
 * `start` is the process start time in clock ticks since boot (`/proc/<pid>/stat`, field 22; `0` where it cannot be
 * read) and `scope` is 8 hex digits naming the boot and the pid namespace the pid belongs to — and the only code that
 * looks other processes up. A process id means nothing outside its host, boot and pid namespace, so a verdict other
 * than `unknown` is given only when all three match this process's; a pid that now belongs to a process started at
 * another time, or that exited (a zombie counts as exited), proves the owner dead.
 *
 * It never kills, signals (except the existence probe `kill(pid, 0)` where `/proc` is absent) or waits for any
 * process, and never throws from `check`.
 */
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";
import type { OwnerLiveness, OwnerLivenessVerdict } from "../../core/ports.js";
import { sha256Hex } from "../../core/product/fingerprint.js";

/** `<host>:<pid>:<start>:<scope>`; the host may itself hold colons, so the other parts are matched from the end. */
const OWNER_ID = /^(.+):(\d{1,10}):(\d{1,20}):([0-9a-f]{8})$/;

/** What this process's owner ids are made of. */
export interface ProcessIdentity {
  host: string;
  pid: number;
  /** Start time in clock ticks since boot, as `/proc/<pid>/stat` gives it; `"0"` when unknown. */
  start: string;
  /** Boot and pid namespace, hashed to 8 hex digits. */
  scope: string;
}

/** Where the facts come from; tests substitute a fake `/proc`. */
export interface ProcFs {
  /** Text of a file under `/proc`, or `null` when it does not exist (ENOENT/ESRCH). Throws on any other error. */
  read(path: string): string | null;
  /** Target of a symbolic link under `/proc`, or `null` when unreadable. */
  link(path: string): string | null;
}

const realProcFs: ProcFs = {
  read(path) {
    try {
      return readFileSync(path, "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ESRCH") return null;
      throw err;
    }
  },
  link(path) {
    try {
      return readlinkSync(path);
    } catch {
      return null;
    }
  },
};

/**
 * The `starttime` field (22nd, in clock ticks since boot) and the state letter of a `/proc/<pid>/stat` line, or
 * `null` when the line does not have that shape. The command name (field 2) is in parentheses and may hold spaces
 * and parentheses itself, so fields are counted after its last `)`.
 */
export function parseProcStat(text: string): { state: string; start: string } | null {
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  const fields = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // After the command come field 3 (state) … field 22 (starttime): index 0 … 19.
  const state = fields[0];
  const start = fields[19];
  if (state === undefined || start === undefined || !/^\d+$/.test(start)) return null;
  return { state, start };
}

/**
 * Owner ids and liveness verdicts for this process. `identity` is read once at construction. Use `ownerId` as the
 * lease owner id and pass the instance to the core as its `OwnerLiveness` port.
 */
export class ProcessLiveness implements OwnerLiveness {
  readonly identity: ProcessIdentity;

  constructor(
    private readonly proc: ProcFs = realProcFs,
    identity?: Partial<ProcessIdentity>,
    private readonly exists: (pid: number) => boolean = processExists,
  ) {
    const pid = identity?.pid ?? process.pid;
    this.identity = {
      host: identity?.host ?? (hostname().slice(0, 80) || "localhost"),
      pid,
      start: identity?.start ?? this.startOf(pid) ?? "0",
      scope: identity?.scope ?? this.scopeHash(),
    };
  }

  /** This process's owner id: `<hostname>:<pid>:<start>:<scope>`. */
  get ownerId(): string {
    const { host, pid, start, scope } = this.identity;
    return `${host}:${pid}:${start}:${scope}`;
  }

  /** The parts of an owner id made by this scheme, or `null` for any other id. */
  static parse(ownerId: string): ProcessIdentity | null {
    const m = OWNER_ID.exec(ownerId);
    if (!m) return null;
    return { host: m[1] as string, pid: Number(m[2]), start: m[3] as string, scope: m[4] as string };
  }

  /**
   * `dead` when the owner ran on this host (same hostname, boot and pid namespace) and its pid no longer runs, is a
   * zombie, or runs a process started at another time; `alive` when it still runs with the recorded start time (a
   * stopped process, SIGSTOP, is alive); `unknown` otherwise. Never throws.
   */
  check(ownerId: string): OwnerLivenessVerdict {
    try {
      const owner = ProcessLiveness.parse(ownerId);
      const me = this.identity;
      if (!owner || owner.host !== me.host || owner.scope !== me.scope) return "unknown";
      if (owner.pid === me.pid) return owner.start === me.start ? "alive" : "dead";
      const stat = this.proc.read(`/proc/${owner.pid}/stat`);
      if (stat === null) {
        // No /proc entry: on Linux the process is gone; elsewhere ask the kernel whether the pid exists at all.
        if (this.proc.read("/proc/self/stat") !== null) return "dead";
        return this.exists(owner.pid) ? "unknown" : "dead";
      }
      const parsed = parseProcStat(stat);
      if (!parsed) return "unknown";
      if (parsed.state === "Z" || parsed.state === "X") return "dead";
      if (owner.start === "0" || me.start === "0") return "unknown";
      return parsed.start === owner.start ? "alive" : "dead";
    } catch {
      return "unknown";
    }
  }

  private startOf(pid: number): string | null {
    try {
      const stat = this.proc.read(`/proc/${pid}/stat`);
      return stat === null ? null : (parseProcStat(stat)?.start ?? null);
    } catch {
      return null;
    }
  }

  /** 8 hex digits of the boot id and the pid namespace: pids and start times mean something only within both. */
  private scopeHash(): string {
    let boot: string | null = null;
    try {
      boot = this.proc.read("/proc/sys/kernel/random/boot_id");
    } catch {
      boot = null;
    }
    const namespace = this.proc.link("/proc/self/ns/pid");
    // The pure SHA-256 of the core (the same digest): `node:crypto` is not loaded before `initialize` (issue 34).
    return sha256Hex(`${boot?.trim() ?? "no-boot-id"}\n${namespace ?? "no-pid-namespace"}`).slice(0, 8);
  }
}

/** `kill(pid, 0)`: false only when the pid does not exist (ESRCH); a permission error means it exists. */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
