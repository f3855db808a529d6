/**
 * Benchmark support: statistics, process memory readings, the machine description and Markdown table formatting.
 *
 * Owns only arithmetic and /proc reads; it never starts processes and never prints. Must never be imported by src/.
 */
import { readFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";

/** The median of `xs` (mean of the two middle values for an even count). NaN for an empty list. */
export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/**
 * The `p`-th percentile of `xs` (0 ≤ p ≤ 100) by linear interpolation between closest ranks, as most tools compute
 * it. NaN for an empty list. Does not modify `xs`.
 */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (rank - lo);
}

/**
 * Peak resident set size (`VmHWM`) and current RSS (`VmRSS`) of a process, in MB (MiB), from /proc/<pid>/status.
 * `undefined` when the process is gone or /proc is unavailable.
 */
export function processMemoryMb(pid: number | "self"): { peakMb: number; rssMb: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    if (!hwm || !rss) return undefined;
    return { peakMb: Number(hwm[1]) / 1024, rssMb: Number(rss[1]) / 1024 };
  } catch {
    return undefined;
  }
}

/** Bytes a process caused to be written to storage so far (`write_bytes` of /proc/<pid>/io); 0 when unavailable. */
export function processWriteBytes(pid: number | "self"): number {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

export interface Machine {
  cpuModel: string;
  cores: number;
  memoryGb: number;
  node: string;
  platform: string;
  /** Load averages (1, 5, 15 min) when the run started: this machine is shared, so they say how noisy it was. */
  loadAverage: string;
  date: string;
}

/** Describes the machine: CPU model from /proc/cpuinfo (else os.cpus), core count, memory, Node version, date. */
export function describeMachine(): Machine {
  let cpuModel = cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (m?.[1]) cpuModel = m[1].trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  let loadAverage = "n/a";
  try {
    loadAverage = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    // not Linux
  }
  return {
    cpuModel,
    cores: cpus().length,
    memoryGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    loadAverage,
    date: new Date().toISOString(),
  };
}

/** Formats a number with `digits` decimals, or `n/a` when it is not finite. */
export function fmt(x: number | undefined, digits = 1): string {
  return x === undefined || !Number.isFinite(x) ? "n/a" : x.toFixed(digits);
}

/** A Markdown table (GitHub style) from a header row and body rows; cells are used as given. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(header), `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`, ...rows.map(line)].join("\n");
}
