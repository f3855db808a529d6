/**
 * Test support: the ACP v1 JSON Schema check every e2e test runs on every message the server sends (issue 13,
 * ACP-V1.md section 6: the schema shipped in `@agentclientprotocol/sdk` is the authority for field names).
 *
 * `AcpWireChecker` is fed the client → server traffic (to learn which method each response answers) and every
 * server → client line. Each server message is checked against the schema's root `Agent` message type and, where ACP
 * defines the method, against that method's own type: `session/update` against `SessionNotification`,
 * `session/request_permission` against `RequestPermissionRequest`, the answer to `session/new` against
 * `NewSessionResponse`, any error against `Error`, and so on. Extension traffic (`_x`, or a bare name outside ACP's
 * `session/`, `fs/`, `terminal/`, `elicitation/`, `$/` spaces) only has to be a valid JSON-RPC message (`ExtRequest`,
 * `ExtNotification`, `ExtResponse`); an unknown method inside an ACP space is a violation, and so is `$/cancelRequest`
 * (vscode-jsonrpc's, not ACP's) on these NDJSON connections.
 *
 * `watchWire(child)` attaches a checker to a server subprocess's stdin and stdout (NDJSON, or Content-Length framing
 * detected from the first bytes, where `$/cancelRequest` is the right cancellation and `$/cancel_request` is not).
 * The shared helpers (server-process.ts, test-host.ts) watch every server they start; the `afterEach` below fails
 * the test during which a violation was seen. Uses Ajv (draft 2020-12) over the schema file as shipped, unmodified.
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { afterEach } from "vitest";

const SCHEMA_PATH = createRequire(import.meta.url).resolve("@agentclientprotocol/sdk/schema/v1/schema.json");
const SCHEMA_ID = "acp-v1";

/** ACP v1 agent → client requests and their params type (schema `AgentRequest`). */
const AGENT_REQUESTS: Record<string, string> = {
  "session/request_permission": "RequestPermissionRequest",
  "fs/read_text_file": "ReadTextFileRequest",
  "fs/write_text_file": "WriteTextFileRequest",
  "terminal/create": "CreateTerminalRequest",
  "terminal/output": "TerminalOutputRequest",
  "terminal/release": "ReleaseTerminalRequest",
  "terminal/wait_for_exit": "WaitForTerminalExitRequest",
  "terminal/kill": "KillTerminalRequest",
  "elicitation/create": "CreateElicitationRequest",
};

/** ACP v1 agent → client notifications and their params type (schema `AgentNotification`, protocol level). */
const AGENT_NOTIFICATIONS: Record<string, string> = {
  "session/update": "SessionNotification",
  "elicitation/complete": "CompleteElicitationNotification",
  "$/cancel_request": "CancelRequestNotification",
};

/** ACP v1 client → agent requests and the result type of their answer (schema `AgentResponse`). */
const AGENT_RESPONSES: Record<string, string> = {
  initialize: "InitializeResponse",
  authenticate: "AuthenticateResponse",
  logout: "LogoutResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/delete": "DeleteSessionResponse",
  "session/resume": "ResumeSessionResponse",
  "session/close": "CloseSessionResponse",
  "session/set_mode": "SetSessionModeResponse",
  "session/set_config_option": "SetSessionConfigOptionResponse",
  "session/prompt": "PromptResponse",
};

/** Name spaces ACP reserves; a method there that ACP v1 does not define is a violation. */
const ACP_SPACES = ["session/", "fs/", "terminal/", "elicitation/", "$/"];

/** One server message that failed the schema. */
export interface SchemaViolation {
  /** The message as the server wrote it. */
  line: string;
  /** What failed: the schema type and Ajv's error list, or why the method is not ACP. */
  problem: string;
}

let compiled: { root: ValidateFunction; def(name: string): ValidateFunction } | undefined;

/** Compiles the shipped schema once per test file. */
function schema(): NonNullable<typeof compiled> {
  if (compiled) return compiled;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema(JSON.parse(readFileSync(SCHEMA_PATH, "utf8")) as object, SCHEMA_ID);
  const cache = new Map<string, ValidateFunction>();
  const get = (ref: string): ValidateFunction => {
    let fn = cache.get(ref);
    if (!fn) {
      fn = ajv.getSchema(`${SCHEMA_ID}${ref}`);
      if (!fn) throw new Error(`The ACP schema has no ${ref}.`);
      cache.set(ref, fn);
    }
    return fn;
  };
  compiled = { root: get("#/anyOf/0"), def: (name) => get(`#/$defs/${name}`) };
  return compiled;
}

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 8)
    .map((e) => `${e.instancePath || "/"} ${e.message ?? ""}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`)
    .join("; ");
}

function isExtension(method: string): boolean {
  return method.startsWith("_") || !ACP_SPACES.some((space) => method.startsWith(space));
}

type Json = Record<string, unknown>;

/**
 * Checks one connection's server → client messages against the ACP v1 JSON Schema. Feed it every client message
 * (`client`) and every server message (`server`) in the order they were written; read `violations`.
 */
export class AcpWireChecker {
  readonly violations: SchemaViolation[] = [];
  /** Messages checked so far. */
  checked = 0;
  /** The framing of the server's output: decides which cancellation notification is the right one. */
  framing: "ndjson" | "content-length" = "ndjson";
  /** Called before a result is judged unanswerable: hands over a last client line still missing its newline. */
  flushClient: () => void = () => undefined;
  private readonly requestMethods = new Map<string, string>();
  private reported = 0;

  /** Records a client → server message (a request's id names the method its answer is checked against). */
  client(message: unknown): void {
    if (message === null || typeof message !== "object" || Array.isArray(message)) return;
    const m = message as Json;
    if (typeof m.method === "string" && "id" in m) this.requestMethods.set(idKey(m.id), m.method);
  }

  /** Records a raw client → server line (non-JSON lines are ignored). */
  clientLine(line: string): void {
    const parsed = parse(line);
    if (parsed !== undefined) this.client(parsed);
  }

  /** Checks one server → client line (a line that is not one JSON object is a violation). */
  serverLine(line: string): void {
    if (line.trim() === "") return;
    const parsed = parse(line);
    this.checked++;
    if (parsed === undefined || parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      this.violations.push({ line, problem: "not one JSON object" });
      return;
    }
    const problem = this.problemOf(parsed as Json);
    if (problem !== undefined) this.violations.push({ line, problem });
  }

  /** Violations not returned by an earlier call (each is reported once). */
  takeNew(): SchemaViolation[] {
    const fresh = this.violations.slice(this.reported);
    this.reported = this.violations.length;
    return fresh;
  }

  private problemOf(m: Json): string | undefined {
    const s = schema();
    if (!s.root(m)) return `not an ACP Agent message: ${describeErrors(s.root.errors)}`;
    const method = typeof m.method === "string" ? m.method : undefined;
    if (method !== undefined && "id" in m) {
      const def = AGENT_REQUESTS[method];
      if (def === undefined)
        return isExtension(method) ? undefined : `${method} is not an ACP v1 agent → client request`;
      return this.against(def, m.params);
    }
    if (method !== undefined) {
      if (method === "$/cancelRequest" && this.framing === "content-length") return undefined;
      if (method === "$/cancel_request" && this.framing === "content-length") {
        return "$/cancel_request on a Content-Length connection (PROTOCOL.md section 2: $/cancelRequest there)";
      }
      const def = AGENT_NOTIFICATIONS[method];
      if (def === undefined) {
        return isExtension(method) ? undefined : `${method} is not an ACP v1 agent → client notification`;
      }
      return this.against(def, m.params);
    }
    if ("error" in m) return this.against("Error", m.error);
    if (!this.requestMethods.has(idKey(m.id))) this.flushClient();
    const answered = this.requestMethods.get(idKey(m.id));
    if (answered === undefined) return `a result for id ${JSON.stringify(m.id)}, which no client request had`;
    const def = AGENT_RESPONSES[answered];
    if (def === undefined) return isExtension(answered) ? undefined : `${answered} is not an ACP v1 agent method`;
    return this.against(def, m.result);
  }

  private against(def: string, value: unknown): string | undefined {
    const fn = schema().def(def);
    return fn(value) ? undefined : `${def}: ${describeErrors(fn.errors)}`;
  }
}

function parse(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}

function idKey(id: unknown): string {
  return `${typeof id}:${String(id)}`;
}

/** Splits a byte stream into messages: NDJSON lines, or Content-Length frames when the stream starts with one. */
function messageSplitter(onMessage: (text: string) => void, onFraming: (framing: "content-length") => void) {
  let buffer = Buffer.alloc(0);
  let mode: "detect" | "ndjson" | "content-length" = "detect";
  const push = (chunk: Buffer | string): void => {
    buffer = Buffer.concat([buffer, typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk]);
    for (;;) {
      if (mode === "detect") {
        const head = buffer.toString("latin1").trimStart();
        if (head === "") return;
        if ("Content-Length:".startsWith(head.slice(0, 15)) && head.length < 15) return;
        mode = head.startsWith("Content-Length:") ? "content-length" : "ndjson";
        if (mode === "content-length") onFraming(mode);
      }
      if (mode === "ndjson") {
        const at = buffer.indexOf(0x0a);
        if (at < 0) return;
        onMessage(buffer.subarray(0, at).toString("utf8").replace(/\r$/, ""));
        buffer = buffer.subarray(at + 1);
        continue;
      }
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = /Content-Length:\s*(\d+)/i.exec(buffer.subarray(0, end).toString("latin1"))?.[1];
      if (length === undefined) {
        buffer = buffer.subarray(end + 4);
        continue;
      }
      const total = end + 4 + Number(length);
      if (buffer.length < total) return;
      onMessage(buffer.subarray(end + 4, total).toString("utf8"));
      buffer = buffer.subarray(total);
    }
  };
  /** Takes an NDJSON line still missing its newline as complete. */
  const flush = (): void => {
    if (mode === "content-length" || buffer.length === 0) return;
    const rest = buffer.toString("utf8");
    buffer = Buffer.alloc(0);
    onMessage(rest.replace(/\r$/, ""));
  };
  return Object.assign(push, { flush });
}

const watched = new Set<AcpWireChecker>();

/**
 * Checks every message `child` (a server subprocess) writes to stdout against the ACP v1 schema, learning request
 * methods from what is written to its stdin. The test during which a violation shows up fails (afterEach below).
 */
export function watchWire(child: ChildProcessWithoutNullStreams): AcpWireChecker {
  const checker = new AcpWireChecker();
  watched.add(checker);
  const fromClient = messageSplitter(
    (text) => checker.clientLine(text),
    () => undefined,
  );
  checker.flushClient = fromClient.flush;
  const write = child.stdin.write.bind(child.stdin) as (...args: unknown[]) => boolean;
  child.stdin.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
    if (typeof chunk === "string" || chunk instanceof Uint8Array) {
      try {
        fromClient(typeof chunk === "string" ? chunk : Buffer.from(chunk));
      } catch {
        // The checker never breaks the traffic it watches.
      }
    }
    return write(chunk, ...rest);
  }) as typeof child.stdin.write;
  child.stdout.on(
    "data",
    messageSplitter(
      (text) => checker.serverLine(text),
      (framing) => (checker.framing = framing),
    ),
  );
  return checker;
}

afterEach(() => {
  const fresh = [...watched].flatMap((c) => c.takeNew());
  assertNoViolations(fresh);
});

/** Throws with every violation listed (for an explicit check at the end of a test). */
export function assertNoViolations(violations: readonly SchemaViolation[], what = "the server"): void {
  if (violations.length === 0) return;
  const list = violations.map((v) => `- ${v.problem}\n  ${v.line.slice(0, 500)}`).join("\n");
  throw new Error(`${violations.length} message(s) ${what} sent fail the ACP v1 JSON Schema:\n${list}`);
}
