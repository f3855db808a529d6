/**
 * Benchmark support: a raw newline-delimited JSON-RPC client of a child process over its real stdio pipes — the same
 * client for the server and for the echo floor, so both are measured through identical code.
 *
 * Owns spawning, request ids, matching responses, counting notifications, and an optional slow reader (it reads at
 * most `bytesPerTick` bytes of the child's stdout every `tickMs`, so the child's writes back up into its own
 * buffers). It never interprets results beyond their ids and never kills anything but its own child.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";

export interface SlowReader {
  bytesPerTick: number;
  tickMs: number;
}

export interface NdjsonProcessOptions {
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Read stdout slowly (figure 3); default: read as fast as it comes. */
  slow?: SlowReader;
  /** Called for every notification (a message with a method and no id). */
  onNotification?: (method: string, params: Record<string, unknown>) => void;
}

interface Pending {
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  /** The caller does not read the result (`call`): a success line is not parsed. */
  unread: boolean;
  /** Called with the times of the answer (`timedRequest`) right before `resolve`. */
  timed?: (receivedAt: number, parsedAt: number) => void;
}

/**
 * When one request's answer came (`timedRequest`), each a `performance.now()` of this process: the request written
 * (`sentAt`), the last byte of its answer line received (`receivedAt`: the server's latency ends here, as every
 * JSON-RPC round-trip figure measures it), and that line decoded and `JSON.parse`d by this client (`parsedAt`: adds
 * this client's own cost, which grows with the answer: ~0.2 s for the 22 MB `product.list` of 100,000 products).
 */
export interface AnswerTimes {
  sentAt: number;
  receivedAt: number;
  parsedAt: number;
}

/** How every success or error response of both processes under test begins (compact, members in this order). */
const RESPONSE_PREFIX = Buffer.from('{"jsonrpc":"2.0","id":');
const RESULT_MEMBER = Buffer.from(',"result":');
const NEWLINE = 0x0a;

/** One child process and its NDJSON JSON-RPC client. */
export class NdjsonProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** `performance.now()` right before `spawn`. */
  readonly spawnedAt: number;
  readonly exited: Promise<number | null>;
  stderr = "";
  /** stdout bytes received so far. */
  bytesIn = 0;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** The start of a line whose end has not arrived yet. */
  private partial: Buffer[] = [];
  /** `performance.now()` when the chunk holding the end of the line being handled arrived. */
  private lineAt = 0;
  private slowTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: NdjsonProcessOptions) {
    this.spawnedAt = performance.now();
    this.child = spawn(options.command, options.args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exited = new Promise((resolve) => this.child.once("exit", (code) => resolve(code)));
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-20_000);
    });
    this.child.stdin.on("error", () => undefined);
    if (options.slow) this.readSlowly(options.slow);
    else this.child.stdout.on("data", (chunk: Buffer) => this.onData(chunk));
    this.child.stdout.on("end", () => {
      for (const p of this.pending.values()) p.reject(new Error(`stdout ended; stderr: ${this.stderr.slice(-2000)}`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid as number;
  }

  private readSlowly(slow: SlowReader): void {
    const stdout = this.child.stdout;
    stdout.pause();
    const tick = () => {
      let budget = slow.bytesPerTick;
      while (budget > 0) {
        const chunk = stdout.read(Math.min(budget, Math.max(1, stdout.readableLength))) as Buffer | null;
        if (chunk === null) break;
        budget -= chunk.length;
        this.onData(chunk);
      }
      this.slowTimer = setTimeout(tick, slow.tickMs);
    };
    this.slowTimer = setTimeout(tick, slow.tickMs);
    stdout.once("end", () => {
      if (this.slowTimer) clearTimeout(this.slowTimer);
      // Whatever is still buffered is delivered at once.
      for (let chunk = stdout.read() as Buffer | null; chunk !== null; chunk = stdout.read() as Buffer | null)
        this.onData(chunk);
    });
  }

  /** Switches a slow reader to reading at full speed (e.g. to drain the rest quickly). */
  readFast(): void {
    if (!this.options.slow) return;
    if (this.slowTimer) clearTimeout(this.slowTimer);
    this.child.stdout.on("data", (chunk: Buffer) => this.onData(chunk));
    this.child.stdout.resume();
  }

  /**
   * Splits stdout into lines without decoding them: a success response to a `call` is matched by its id alone, so
   * the client's own cost per answer does not grow with the size of results nobody reads (issue 16: parsing the
   * server's 1.9 KB status answers made this client, not the server, the bottleneck of pipelined requests).
   */
  private onData(chunk: Buffer): void {
    this.lineAt = performance.now();
    this.bytesIn += chunk.length;
    let start = 0;
    for (let i = chunk.indexOf(NEWLINE); i >= 0; i = chunk.indexOf(NEWLINE, start)) {
      let line = chunk.subarray(start, i);
      if (this.partial.length > 0) {
        this.partial.push(line);
        line = Buffer.concat(this.partial);
        this.partial = [];
      }
      start = i + 1;
      if (!this.answeredUnread(line)) {
        const text = line.toString("utf8");
        if (text.trim() !== "") this.onLine(text);
      }
    }
    if (start < chunk.length) this.partial.push(chunk.subarray(start));
  }

  /** True when `line` is the success response to a pending `call` (then settled here, its result never parsed). */
  private answeredUnread(line: Buffer): boolean {
    if (line.length < RESPONSE_PREFIX.length + RESULT_MEMBER.length + 1) return false;
    if (line.compare(RESPONSE_PREFIX, 0, RESPONSE_PREFIX.length, 0, RESPONSE_PREFIX.length) !== 0) return false;
    let id = 0;
    let at = RESPONSE_PREFIX.length;
    for (; at < line.length && at < RESPONSE_PREFIX.length + 15; at += 1) {
      const digit = (line[at] as number) - 0x30;
      if (digit < 0 || digit > 9) break;
      id = id * 10 + digit;
    }
    if (at === RESPONSE_PREFIX.length) return false;
    if (line.compare(RESULT_MEMBER, 0, RESULT_MEMBER.length, at, at + RESULT_MEMBER.length) !== 0) return false;
    const p = this.pending.get(id);
    if (p === undefined || !p.unread) return false;
    this.pending.delete(id);
    p.resolve(undefined);
    return true;
  }

  private onLine(line: string): void {
    const m = JSON.parse(line) as {
      id?: number;
      method?: string;
      params?: Record<string, unknown>;
      result?: unknown;
      error?: { code: number; message: string };
    };
    if (m.method !== undefined) {
      if (m.id === undefined) this.options.onNotification?.(m.method, m.params ?? {});
      return; // server → client requests are not expected by the benchmarks
    }
    if (typeof m.id !== "number") return;
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.error) p.reject(new Error(`${m.error.code}: ${m.error.message}`));
    else {
      p.timed?.(this.lineAt, performance.now());
      p.resolve(m.result);
    }
  }

  /** Sends one request and resolves with its result (rejects with the JSON-RPC error). */
  request<T = Record<string, unknown>>(method: string, params: unknown): Promise<T> {
    return this.send<T>(method, params, false);
  }

  /**
   * `request`, resolving with the result and when it came (`AnswerTimes`: sent, last byte received, parsed by this
   * client). Rejects with the JSON-RPC error.
   */
  async timedRequest<T = Record<string, unknown>>(
    method: string,
    params: unknown,
  ): Promise<{ result: T } & AnswerTimes> {
    let receivedAt = 0;
    let parsedAt = 0;
    const sentAt = performance.now();
    const result = await this.send<T>(method, params, false, (received, parsed) => {
      receivedAt = received;
      parsedAt = parsed;
    });
    return { result, sentAt, receivedAt, parsedAt };
  }

  /**
   * Sends one request and resolves once it was answered with a result, without reading the result (rejects with
   * the JSON-RPC error): what the round-trip figures use, so both processes are timed through the same cheap client.
   */
  call(method: string, params: unknown): Promise<void> {
    return this.send<void>(method, params, true);
  }

  private send<T>(method: string, params: unknown, unread: boolean, timed?: Pending["timed"]): Promise<T> {
    const id = this.nextId++;
    const promise = new Promise<T>((resolve, reject) =>
      this.pending.set(id, { resolve: resolve as (r: unknown) => void, reject, unread, ...(timed ? { timed } : {}) }),
    );
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    return promise;
  }

  /** Closes stdin (the graceful way to stop either process) and waits for the exit; SIGKILL after `graceMs`. */
  async close(graceMs = 10_000): Promise<number | null> {
    this.child.stdin.end();
    this.readFast();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}
