/**
 * `record --normalize` (protocol/TRANSCRIPTS.md, "Normalisation"): turns recorded messages into lines that replay
 * against a fresh server, by replacing the values a fresh server will choose differently with captures, references
 * and placeholders.
 *
 * Owns the rules: server → client request ids become captures answered by reference; generated ids (`prd_…`,
 * `ckp_…`, `ses_…`, `p_…`, any `word_<12-32 hex>`, UUIDs) are captured where first received and referenced after;
 * the workspace (the first absolute `cwd` the client sends) becomes the predefined `${workspace}`; ISO dates and the
 * counters named in `VOLATILE_NUMBER_KEYS` become typed placeholders; version strings in the `initialize` answer
 * become `{"$type": "string"}`; the request id in a server's `$/cancel_request` refers to the captured request.
 * Decisions depend only on earlier messages, so it works line by line while
 * recording. It must never do I/O and never change a value a fresh server would reproduce (method names, client
 * request ids, literal text).
 */
import type { Json, TranscriptLine } from "./format.js";

/** Keys whose numeric values differ from run to run (durations, token estimates); replaced by `$type`. */
export const VOLATILE_NUMBER_KEYS: readonly string[] = [
  "elapsedMs",
  "durationMs",
  "inputTokens",
  "outputTokens",
  "usedTokens",
];

const GENERATED_ID = /^([a-z][a-z0-9]{0,7})_[0-9a-f]{12,32}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

/** Embedded forms, as regex sources (no anchors). */
const GENERATED_ID_SRC = "\\b[a-z][a-z0-9]{0,7}_[0-9a-f]{12,32}\\b";
const UUID_SRC = "\\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\\b";
const ISO_DATE_SRC = "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{1,9})?(?:Z|[+-]\\d{2}:\\d{2})";

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function idKey(id: unknown): string {
  return `${typeof id}:${JSON.stringify(id)}`;
}

function isAbsolutePath(value: unknown): value is string {
  return (
    typeof value === "string" && (value.startsWith("/") || /^[A-Za-z]:[\\/]/.test(value) || value.startsWith("\\\\"))
  );
}

/** A shape-preserving regex for an embedded generated id or UUID (same prefix, same length of hex). */
function shapeOf(value: string): string {
  const m = /^([a-z][a-z0-9]{0,7})_([0-9a-f]+)$/.exec(value);
  if (m) return `${m[1]}_[0-9a-f]{${m[2]!.length}}`;
  return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
}

/**
 * Stateful normaliser for one recording: feed it every message in the order the proxy saw them.
 * Not reusable across recordings. Never throws on odd input: anything it does not recognise is kept literally.
 */
export class Normalizer {
  /** Captured value → capture name. */
  private readonly names = new Map<string, string>();
  private readonly counters = new Map<string, number>();
  private workspace: string | undefined;
  /** Ids of server → client requests → capture name. */
  private readonly serverRequests = new Map<string, string>();
  /** Ids of the client's `initialize` requests. */
  private readonly initializeIds = new Set<string>();

  /** The workspace path detected so far (the first absolute `cwd` the client sent), if any. */
  get workspacePath(): string | undefined {
    return this.workspace;
  }

  /** Normalises one message (already parsed JSON) into a transcript line of direction `dir`. */
  line(dir: "send" | "recv", message: unknown): TranscriptLine {
    if (dir === "send") return { dir: "send", msg: this.send(message) as Record<string, Json> };
    return { dir: "recv", msg: this.recv(message) as Record<string, Json> };
  }

  private nextName(prefix: string): string {
    const n = (this.counters.get(prefix) ?? 0) + 1;
    this.counters.set(prefix, n);
    return `${prefix}${n}`;
  }

  private send(message: unknown): Json {
    if (isRecord(message)) {
      if (message.method === "initialize" && message.id !== undefined) this.initializeIds.add(idKey(message.id));
      if (this.workspace === undefined) this.findWorkspace(message.params);
      const isResponse = message.method === undefined && message.id !== undefined;
      const out: Record<string, Json> = {};
      for (const [k, v] of Object.entries(message)) {
        if (k === "id" && isResponse && this.serverRequests.has(idKey(v))) {
          out[k] = { $ref: this.serverRequests.get(idKey(v))! };
        } else {
          out[k] = this.value(v, "send", k, false);
        }
      }
      return out;
    }
    return this.value(message, "send", "", false);
  }

  private recv(message: unknown): Json {
    if (!isRecord(message)) return { $literal: message as Json };
    const isRequest = typeof message.method === "string" && message.id !== undefined && message.id !== null;
    const inInitialize = message.method === undefined && this.initializeIds.has(idKey(message.id));
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(message)) {
      if (k === "id" && isRequest) {
        const name = this.nextName("req");
        this.serverRequests.set(idKey(v), name);
        out[k] = { $capture: name };
      } else if (k === "id") {
        // A response echoes the client's own request id (or null): a fresh server echoes the same one.
        out[k] = (v ?? null) as Json;
      } else if (k === "params" && isCancellation(message.method) && isRecord(v)) {
        // `$/cancel_request {requestId}` / `$/cancelRequest {id}` name one of the server's own requests.
        const params: Record<string, Json> = {};
        for (const [pk, pv] of Object.entries(v)) {
          const name = (pk === "requestId" || pk === "id") && this.serverRequests.get(idKey(pv));
          params[pk] = name ? { $ref: name } : this.value(pv, "recv", pk, false);
        }
        out[k] = params;
      } else {
        out[k] = this.value(v, "recv", k, inInitialize && k === "result");
      }
    }
    return out;
  }

  private findWorkspace(params: unknown): void {
    if (!isRecord(params)) return;
    if (isAbsolutePath(params.cwd)) {
      const cwd = params.cwd;
      this.workspace = cwd.length > 1 ? cwd.replace(/[\\/]+$/, "") : cwd;
    }
  }

  private value(v: unknown, dir: "send" | "recv", key: string, initializeResult: boolean): Json {
    if (Array.isArray(v)) return v.map((x) => this.value(x, dir, key, initializeResult));
    if (isRecord(v)) {
      if (Object.keys(v).some((k) => k.startsWith("$"))) return { $literal: v as Json };
      const out: Record<string, Json> = {};
      for (const [k, x] of Object.entries(v)) out[k] = this.value(x, dir, k, initializeResult);
      return out;
    }
    if (dir === "recv" && typeof v === "number" && VOLATILE_NUMBER_KEYS.includes(key)) {
      return { $type: Number.isInteger(v) ? "integer" : "number" };
    }
    if (typeof v !== "string") return (v ?? null) as Json;
    if (dir === "recv" && initializeResult && key === "version") return { $type: "string" };
    return dir === "send" ? this.sendString(v) : this.recvString(v);
  }

  private sendString(s: string): Json {
    if (this.workspace !== undefined && s === this.workspace) return { $ref: "workspace" };
    const name = this.names.get(s);
    if (name !== undefined) return { $ref: name };
    const parts = this.split(s, false);
    if (!parts.some((p) => p.kind === "ref") || s.includes("${")) return s;
    return {
      $template: parts.map((p) => (p.kind === "ref" ? `\${${p.name}}` : p.kind === "text" ? p.text : "")).join(""),
    };
  }

  private recvString(s: string): Json {
    if (this.workspace !== undefined && s === this.workspace) return { $ref: "workspace" };
    const known = this.names.get(s);
    if (known !== undefined) return { $ref: known };
    if (GENERATED_ID.test(s) || UUID.test(s)) {
      const name = this.nextName(GENERATED_ID.exec(s)?.[1] ?? "uuid");
      this.names.set(s, name);
      return { $capture: name };
    }
    if (ISO_DATE.test(s)) return { $type: "iso-date" };
    const parts = this.split(s, true);
    if (parts.every((p) => p.kind === "text")) return s;
    const needsRegex = parts.some((p) => p.kind === "capture" || p.kind === "date") || s.includes("${");
    if (!needsRegex) {
      return {
        $template: parts.map((p) => (p.kind === "ref" ? `\${${p.name}}` : p.kind === "text" ? p.text : "")).join(""),
      };
    }
    const introduced = new Set<string>();
    const source = parts
      .map((p) => {
        switch (p.kind) {
          case "text":
            return escapeRegex(p.text);
          case "ref":
            return `\${${p.name}}`;
          case "date":
            return ISO_DATE_SRC;
          case "capture":
            if (introduced.has(p.name)) return `\\k<${p.name}>`;
            introduced.add(p.name);
            return `(?<${p.name}>${p.shape})`;
        }
      })
      .join("");
    return { $regex: `^${source}$` };
  }

  /**
   * Splits a string into literal text and embedded values: the workspace and captured values (references), and on
   * received strings also new generated ids/UUIDs (captures, bound as a side effect) and ISO dates.
   */
  private split(
    s: string,
    received: boolean,
  ): (
    | { kind: "text"; text: string }
    | { kind: "ref"; name: string }
    | { kind: "capture"; name: string; shape: string }
    | { kind: "date" }
  )[] {
    const literals: [string, string][] = [];
    if (this.workspace !== undefined && this.workspace.length > 1) literals.push([this.workspace, "workspace"]);
    for (const [value, name] of this.names) if (value.length >= 6) literals.push([value, name]);
    literals.sort((a, b) => b[0].length - a[0].length);
    const alternatives = literals.map(([value]) => escapeRegex(value));
    if (received) alternatives.push(GENERATED_ID_SRC, UUID_SRC, ISO_DATE_SRC);
    if (alternatives.length === 0) return [{ kind: "text", text: s }];
    const byValue = new Map(literals);
    const out: ReturnType<Normalizer["split"]> = [];
    let last = 0;
    for (const m of s.matchAll(new RegExp(alternatives.join("|"), "g"))) {
      const found = m[0];
      const at = m.index;
      if (at > last) out.push({ kind: "text", text: s.slice(last, at) });
      last = at + found.length;
      const name = byValue.get(found) ?? this.names.get(found);
      if (name !== undefined) out.push({ kind: "ref", name });
      else if (ISO_DATE.test(found)) out.push({ kind: "date" });
      else {
        const captured = this.nextName(GENERATED_ID.exec(found)?.[1] ?? "uuid");
        this.names.set(found, captured);
        out.push({ kind: "capture", name: captured, shape: shapeOf(found) });
      }
    }
    if (last < s.length) out.push({ kind: "text", text: s.slice(last) });
    return out;
  }
}

function isCancellation(method: unknown): boolean {
  return method === "$/cancel_request" || method === "$/cancelRequest";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
