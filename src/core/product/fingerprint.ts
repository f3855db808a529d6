/**
 * Fingerprints of a product's inputs (DESIGN.md guarantee 7 and issue 4, "drift detection"): a pure SHA-256, a
 * canonical JSON encoding, the hash that binds a completed task to the input it was run with, the plan fingerprint,
 * and the comparison that turns two workspace fingerprints into plain-words drift.
 *
 * Everything here is a pure function of its arguments: no I/O, no clock, no `node:` import (the hash is implemented
 * here so the core stays free of `node:crypto`). This file must never decide what to do about drift; the
 * orchestrator does.
 */
import { Plan } from "../../../protocol/common.js";
import type { DependencyOutput, Digest } from "../ports.js";
import type { Fingerprint } from "./records.js";

// ---------------------------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4) over the UTF-8 bytes of a string

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/**
 * The SHA-256 digest of the UTF-8 encoding of `text`, as 64 lower-case hex digits. Pure and deterministic; used for
 * change detection, not for secrecy. Linear in the input length.
 */
export function sha256Hex(text: string): string {
  const bytes = new TextEncoder().encode(text);
  const blocks = Math.ceil((bytes.length + 9) / 64);
  const padded = new Uint8Array(blocks * 64);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  const bits = bytes.length * 8;
  view.setUint32(padded.length - 8, Math.floor(bits / 0x1_0000_0000));
  view.setUint32(padded.length - 4, bits >>> 0);
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const w15 = w[i - 15]!;
      const w2 = w[i - 2]!;
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3);
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) >>> 0;
    }
    let a = h[0]!;
    let b = h[1]!;
    let c = h[2]!;
    let d = h[3]!;
    let e = h[4]!;
    let f = h[5]!;
    let g = h[6]!;
    let hh = h[7]!;
    for (let i = 0; i < 64; i++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + s1 + ch + K[i]! + w[i]!) >>> 0;
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (s0 + maj) >>> 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) >>> 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) >>> 0;
    }
    h[0] = (h[0]! + a) >>> 0;
    h[1] = (h[1]! + b) >>> 0;
    h[2] = (h[2]! + c) >>> 0;
    h[3] = (h[3]! + d) >>> 0;
    h[4] = (h[4]! + e) >>> 0;
    h[5] = (h[5]! + f) >>> 0;
    h[6] = (h[6]! + g) >>> 0;
    h[7] = (h[7]! + hh) >>> 0;
  }
  return [...h].map((x) => x.toString(16).padStart(8, "0")).join("");
}

/**
 * JSON with object keys sorted at every level, so that equal values always encode to equal text (key order in a
 * record read back from a store is not significant). `undefined` fields are omitted as in `JSON.stringify`.
 */
export function canonicalJson(value: unknown): string {
  // Plain JSON data is written out directly (issue 34: the replacer below copies every object to sort its keys, a
  // 1,000-task plan's fingerprint at confirmation); anything else (toJSON, BigInt, a class instance, a `__proto__`
  // key, deep nesting) takes the replacer, whose text this equals whenever both apply.
  const direct = canonicalText(value, 0);
  if (direct !== undefined) return direct;
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** An array index key (an object enumerates those first, in numeric order): left to the replacer. */
const ARRAY_INDEX = /^(?:0|[1-9]\d*)$/;

/** How deep `canonicalText` writes before leaving a value to the replacer (which throws on a cycle). */
const MAX_DIRECT_DEPTH = 64;

/** `canonicalJson` of plain JSON data (`undefined` for what it leaves to the replacer; see there). */
function canonicalText(v: unknown, depth: number): string | undefined {
  if (v === null) return "null";
  switch (typeof v) {
    case "string":
    case "number":
    case "boolean":
      return JSON.stringify(v);
    case "object":
      break;
    default:
      return undefined;
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if (depth >= MAX_DIRECT_DEPTH || typeof (v as { toJSON?: unknown }).toJSON === "function") return undefined;
  if (Array.isArray(v)) {
    let out = "[";
    for (let i = 0; i < v.length; i++) {
      const item: unknown = v[i];
      const text =
        item === undefined || typeof item === "function" || typeof item === "symbol"
          ? "null"
          : canonicalText(item, depth + 1);
      if (text === undefined) return undefined;
      out += i === 0 ? text : `,${text}`;
    }
    return `${out}]`;
  }
  if (proto !== Object.prototype && proto !== null) return undefined;
  const record = v as Record<string, unknown>;
  let out = "{";
  for (const k of Object.keys(record).sort()) {
    // `__proto__` was never an own key of the replacer's copy; index keys come first in its text, in numeric order.
    if (k === "__proto__" || ARRAY_INDEX.test(k)) return undefined;
    const item = record[k];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") continue;
    const text = canonicalText(item, depth + 1);
    if (text === undefined) return undefined;
    out += `${out.length === 1 ? "" : ","}${JSON.stringify(k)}:${text}`;
  }
  return `${out}}`;
}

/** `digest(canonicalJson(value))`; `digest` is SHA-256 hex (`Digest` port), the pure `sha256Hex` by default. */
export function hashOf(value: unknown, digest: Digest = sha256Hex): string {
  return digest(canonicalJson(value));
}

// ---------------------------------------------------------------------------------------------------------------
// Task input binding (guarantee 7)

/** What a task attempt is given: the parts of its input that decide its result. */
export interface TaskInput {
  title: string;
  description: string;
  acceptance?: string | undefined;
  /** The assignee: the instance and the agent of that instance as the plan names it (not the resolved fallback). */
  instanceId: string;
  agentId: string;
  /** Outputs of its dependencies, in `dependsOn` order. */
  dependencyOutputs: readonly Pick<DependencyOutput, "taskId" | "output">[];
}

/**
 * The hash that binds a completed task to its input (DESIGN.md guarantee 7: "by a hash of the task's input (title,
 * description, assignee, dependency outputs), not by its id alone"). Versioned (`ti1:` prefix) so a future change of
 * the encoding is recognisable rather than silently different. `digest` is any SHA-256 (`Digest` port): every
 * implementation gives the same hash.
 */
export function taskInputHash(input: TaskInput, digest: Digest = sha256Hex): string {
  return `ti1:${digest(taskInputJson(input))}`;
}

/**
 * `canonicalJson` of a task input's hashed fields, `{acceptance, agentId, deps, description, instanceId, title}`
 * (keys in sorted order, `deps` as `[taskId, output]` pairs), written out directly when every field is a string as
 * its schema says: the same text as the generic encoding, without its replacer call and key sort per object (issue
 * 34: one per task start). Any other value takes the generic encoding.
 */
function taskInputJson(input: TaskInput): string {
  const deps: [string, string][] = [];
  let strings =
    typeof input.title === "string" &&
    typeof input.description === "string" &&
    typeof input.instanceId === "string" &&
    typeof input.agentId === "string" &&
    (input.acceptance === undefined || typeof input.acceptance === "string");
  for (let i = 0; i < input.dependencyOutputs.length; i++) {
    const d = input.dependencyOutputs[i] as TaskInput["dependencyOutputs"][number];
    if (typeof d.taskId !== "string" || typeof d.output !== "string") strings = false;
    deps.push([d.taskId, d.output]);
  }
  const fields = {
    title: input.title,
    description: input.description,
    acceptance: input.acceptance ?? null,
    instanceId: input.instanceId,
    agentId: input.agentId,
    deps,
  };
  if (!strings) return canonicalJson(fields);
  const j = JSON.stringify;
  return (
    `{"acceptance":${j(fields.acceptance)},"agentId":${j(fields.agentId)},"deps":${j(deps)},` +
    `"description":${j(fields.description)},"instanceId":${j(fields.instanceId)},"title":${j(fields.title)}}`
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Plan and workspace fingerprints (drift detection)

/**
 * Plan fingerprints already computed, per plan object and prompt version, with the digest that computed them (plans
 * are values: never changed in place).
 */
const planHashes = new WeakMap<Plan, Map<string, { digest: Digest; hash: string }>>();

/**
 * The plan fingerprint: the plan (its tasks, instances, budget, version) together with the leader prompt version.
 * The plan is reduced to the keys its schema declares first (`normalisedPlan`, no zod parse), so fields a store does
 * not keep (unknown keys) cannot make a plan read back differ from the one that was written; a plan of the schema's
 * shape is written in one native serialisation with the same text (`planText`). Remembered per plan object (issue 16: a resume asks for the
 * fingerprint of the same 1,000-task plan several times), which relies on plan objects never being changed in place:
 * the state replaces its plan on every event that changes it (state.ts). `digest` is any SHA-256 (`Digest` port).
 */
export function planHash(plan: Plan | undefined, promptVersion: string, digest: Digest = sha256Hex): string {
  if (plan === undefined) return `pl1:${hashOf({ plan: null, promptVersion }, digest)}`;
  let known = planHashes.get(plan);
  const hit = known?.get(promptVersion);
  if (hit !== undefined && hit.digest === digest) return hit.hash;
  const direct = typeof promptVersion === "string" ? planText(plan) : undefined;
  const text =
    direct !== undefined
      ? `{"plan":${direct},"promptVersion":${JSON.stringify(promptVersion)}}`
      : canonicalJson({ plan: normalisedPlan(plan), promptVersion });
  const hash = `pl1:${digest(text)}`;
  if (!known) planHashes.set(plan, (known = new Map()));
  known.set(promptVersion, { digest, hash });
  return hash;
}

/**
 * The plan as its schema's parse returns it: keys `Plan` does not declare are left out (a store keeps only the declared
 * ones). Walks the plan once along `PLAN_KEYS` and copies only the objects that carry unknown keys; it does not check
 * values, which the plan's writers did (issue 34: the zod parse of a 1,000-task plan at confirmation, schemas built on
 * first use included, was ~14 % of the run). A value of another kind than the schema's (a list where an object is
 * declared...) falls back to `Plan.safeParse`, and to the plan as given when it does not parse, as before: the hash of
 * a plan the schema accepts is unchanged. Exported for the test that checks `planText` against it.
 */
export function normalisedPlan(plan: Plan): unknown {
  const stripped = declaredOnly(PLAN_KEYS, plan);
  if (stripped !== UNSUPPORTED) return stripped;
  const parsed = Plan.safeParse(plan);
  return parsed.success ? parsed.data : plan;
}

/**
 * Where a schema declares keys: `scalar` (a string, number...: nothing to strip), an object's declared fields, a list's
 * items, or an optional (or nullable) value. test/core/product/plan-hash.test.ts derives this tree from the `Plan`
 * schema itself and fails when the two differ (a field added to the schema must be added here).
 */
export type DeclaredKeys =
  | "scalar"
  | { object: Readonly<Record<string, DeclaredKeys>> }
  | { array: DeclaredKeys }
  | { optional: DeclaredKeys };

const INSTANCE_KEYS: DeclaredKeys = {
  object: { instanceId: "scalar", agentId: "scalar", role: "scalar", name: { optional: "scalar" } },
};
const TASK_KEYS: DeclaredKeys = {
  object: {
    taskId: "scalar",
    title: "scalar",
    description: "scalar",
    instanceId: "scalar",
    dependsOn: { array: "scalar" },
    acceptance: { optional: "scalar" },
    maxAttempts: { optional: "scalar" },
    supersedes: { optional: "scalar" },
  },
};

/** The keys `Plan` (protocol/common.ts) declares, at every level. */
export const PLAN_KEYS: DeclaredKeys = {
  object: {
    productId: "scalar",
    version: "scalar",
    name: "scalar",
    summary: "scalar",
    instances: { array: INSTANCE_KEYS },
    tasks: { array: TASK_KEYS },
    budget: { optional: { object: { maxTotalTokens: { optional: "scalar" }, maxDurationMs: { optional: "scalar" } } } },
  },
};

/** Marks a value of another kind than its schema's (`declaredOnly`; the caller parses instead). */
const UNSUPPORTED: unique symbol = Symbol("unsupported");

/**
 * `value` without the object keys `keys` does not declare (the same object when it has none), or `UNSUPPORTED`.
 * Recursion depth is the schema's nesting (a few levels for a plan), not the value's size.
 */
function declaredOnly(keys: DeclaredKeys, value: unknown): unknown {
  if (keys === "scalar") return value !== null && typeof value === "object" ? UNSUPPORTED : value;
  if ("optional" in keys) return value === undefined || value === null ? value : declaredOnly(keys.optional, value);
  if ("array" in keys) {
    if (!Array.isArray(value)) return UNSUPPORTED;
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = declaredOnly(keys.array, value[i]);
      if (item === UNSUPPORTED) return UNSUPPORTED;
      if (item !== value[i]) (out ??= value.slice())[i] = item;
    }
    return out ?? value;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return UNSUPPORTED;
  const fields = keys.object;
  const record = value as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(record)) {
    const field = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (field === undefined) {
      out ??= { ...record };
      delete out[key];
      continue;
    }
    const kept = declaredOnly(field, record[key]);
    if (kept === UNSUPPORTED) return UNSUPPORTED;
    if (kept !== record[key]) (out ??= { ...record })[key] = kept;
  }
  return out ?? value;
}

/** Every key `PLAN_KEYS` declares at any level, sorted: the property list `planText` serialises with. */
const PLAN_KEY_LIST: readonly string[] = (() => {
  const names = new Set<string>();
  const collect = (keys: DeclaredKeys): void => {
    if (keys === "scalar") return;
    if ("optional" in keys) return collect(keys.optional);
    if ("array" in keys) return collect(keys.array);
    for (const [k, v] of Object.entries(keys.object)) {
      names.add(k);
      collect(v);
    }
  };
  collect(PLAN_KEYS);
  return [...names].sort();
})();

/**
 * `canonicalJson(declaredOnly(PLAN_KEYS, plan))` written by one native `JSON.stringify` with the declared keys as its
 * property list (which writes each object's listed keys in the list's order: sorted), or `undefined` when that could
 * differ (issue 34: the plan fingerprint at confirmation built a string field by field, a key sort per object and a
 * second walk for a 1,000-task plan). `planShaped` checks first that every object is plain with no `toJSON`, holds no key
 * declared at another level only, and every value is of its declared kind (a string, number, boolean or null where
 * a scalar is declared); the caller takes the general path otherwise, so the text never differs.
 */
function planText(plan: Plan): string | undefined {
  for (const k of PLAN_KEY_LIST) if (k in Object.prototype) return undefined;
  return planShaped(PLAN_KEYS, plan) ? JSON.stringify(plan, PLAN_KEY_LIST as string[]) : undefined;
}

/** True when `value` serialises with the property list exactly as `declaredOnly` then `canonicalJson` write it. */
function planShaped(keys: DeclaredKeys, value: unknown): boolean {
  if (keys === "scalar") {
    return value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean";
  }
  if ("optional" in keys) return value === null || planShaped(keys.optional, value);
  if (value === null || typeof value !== "object") return false;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
  if ("array" in keys) {
    if (!Array.isArray(value)) return false;
    for (let i = 0; i < value.length; i++) if (!planShaped(keys.array, value[i])) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (Array.isArray(value) || (proto !== Object.prototype && proto !== null)) return false;
  const fields = keys.object;
  const record = value as Record<string, unknown>;
  // Indexed (issue 34): a 1,000-task plan is walked once per confirmation, in code not optimised yet.
  const own = Object.keys(record);
  for (let k = 0; k < own.length; k++) {
    const key = own[k] as string;
    const field = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (field === undefined) {
      // An undeclared key is left out by `declaredOnly`; the property list would write it if another level lists it.
      if (PLAN_KEY_LIST.includes(key)) return false;
      continue;
    }
    const item = record[key];
    if (item !== undefined && !planShaped(field, item)) return false;
  }
  // The property list reads every listed key, own enumerable or not: none may hide from `Object.keys`.
  for (const key in fields) if (key in record && !Object.prototype.propertyIsEnumerable.call(record, key)) return false;
  return true;
}

/** The fingerprint of a registry's agent definitions (any JSON-able description of them). */
export function agentsHash(definitions: unknown, digest: Digest = sha256Hex): string {
  return `ag1:${hashOf(definitions, digest)}`;
}

/**
 * The fingerprint of each agent definition, by `agentId` (issue 28: a reader names which agents differ, not just that
 * the registry hash does). Each value is `agentsHash` of that one definition.
 */
export function agentHashes(
  definitions: readonly { agentId: string }[],
  digest: Digest = sha256Hex,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const d of definitions) out[d.agentId] = agentsHash(d, digest);
  return out;
}

/** How one agent differs between the recorded registry and the one compared with it. */
export interface AgentDifference {
  agentId: string;
  /** `changed`: defined in both, differently; `onlyRecorded`: in the recorded registry only; `onlyCurrent`: new. */
  change: "changed" | "onlyRecorded" | "onlyCurrent";
}

/**
 * The agents that differ between two per-agent fingerprints (`agentHashes`), sorted by id; `undefined` when either
 * side did not record them (a run recorded before issue 28).
 */
export function agentDifferences(
  recorded: Record<string, string> | undefined,
  current: Record<string, string> | undefined,
): AgentDifference[] | undefined {
  if (recorded === undefined || current === undefined) return undefined;
  const ids = [...new Set([...Object.keys(recorded), ...Object.keys(current)])].sort();
  return ids.flatMap((agentId): AgentDifference[] => {
    const was = recorded[agentId];
    const now = current[agentId];
    if (was === now) return [];
    return [{ agentId, change: was === undefined ? "onlyCurrent" : now === undefined ? "onlyRecorded" : "changed" }];
  });
}

/**
 * Whose registry the current fingerprint was taken from: `server`, a server that would drive the run (its agents
 * changed since the run was recorded), or `reader`, an operator command reading the store (its registry is compared
 * with the one the driving server recorded; nothing about the run changed).
 */
export type FingerprintView = "server" | "reader";

/** One input of a run that changed between the recorded fingerprint and now. */
export interface Drift {
  /** Which input changed. */
  what: "promptVersion" | "plan" | "gitHead" | "agents";
  from: string | null;
  to: string | null;
  /** One plain sentence, e.g. `the workspace git HEAD moved (1a2b3c4d5e6f → 9f8e7d6c5b4a)`. */
  text: string;
  /** For `agents`, when both sides recorded per-agent fingerprints: which agents differ. */
  agents?: AgentDifference[];
}

const short = (v: string | null): string => {
  if (v === null) return "none";
  const bare = v.replace(/^[a-z]{2}\d:/, "");
  return bare.length > 12 ? bare.slice(0, 12) : bare;
};

/**
 * Compares a recorded fingerprint with the current one and describes every difference in plain words, in a fixed
 * order (prompt version, plan, git HEAD, agents). The plan hash is only compared when the prompt version is the same
 * (it contains the version, so a version change alone would otherwise be reported twice). Returns `[]` when nothing
 * changed. `view` words an agents difference (issue 28): a reader's registry is said to differ from the one the
 * server recorded, naming the agents (`Fingerprint.agentHashes`), instead of the run's agents having changed.
 */
export function compareFingerprints(
  recorded: Fingerprint,
  current: Fingerprint,
  view: FingerprintView = "server",
): Drift[] {
  const out: Drift[] = [];
  if (recorded.promptVersion !== current.promptVersion) {
    out.push({
      what: "promptVersion",
      from: recorded.promptVersion,
      to: current.promptVersion,
      text: `the leader prompt template changed (${recorded.promptVersion} → ${current.promptVersion})`,
    });
  } else if (recorded.planHash !== current.planHash) {
    out.push({
      what: "plan",
      from: recorded.planHash,
      to: current.planHash,
      text: `the plan differs from the one recorded with the checkpoint (${short(recorded.planHash)} → ${short(current.planHash)})`,
    });
  }
  if (recorded.gitHead !== current.gitHead) {
    const text =
      current.gitHead === null
        ? `the workspace is no longer a git checkout (HEAD was ${short(recorded.gitHead)})`
        : recorded.gitHead === null
          ? `the workspace became a git checkout (HEAD ${short(current.gitHead)})`
          : `the workspace git HEAD moved (${short(recorded.gitHead)} → ${short(current.gitHead)})`;
    out.push({ what: "gitHead", from: recorded.gitHead, to: current.gitHead, text });
  }
  if (recorded.agentsHash !== current.agentsHash) {
    const agents = agentDifferences(recorded.agentHashes, current.agentHashes);
    out.push({
      what: "agents",
      from: recorded.agentsHash,
      to: current.agentsHash,
      text: agentsDriftText(agents, view, `${short(recorded.agentsHash)} → ${short(current.agentsHash)}`),
      ...(agents !== undefined ? { agents } : {}),
    });
  }
  return out;
}

const QUOTED = (ids: string[]): string => ids.map((id) => `"${id}"`).join(", ");

/** The plain sentence for an agents drift, naming the agents when known (`hashes`: `old → new`, else shown). */
function agentsDriftText(agents: AgentDifference[] | undefined, view: FingerprintView, hashes: string): string {
  const ids = (change: AgentDifference["change"]) =>
    (agents ?? []).filter((a) => a.change === change).map((a) => a.agentId);
  const [changed, onlyRecorded, onlyCurrent] = [ids("changed"), ids("onlyRecorded"), ids("onlyCurrent")];
  const here = view === "reader";
  const parts = [
    changed.length > 0 ? `${QUOTED(changed)} ${here ? "defined differently here" : "changed"}` : "",
    onlyRecorded.length > 0 ? `${QUOTED(onlyRecorded)} ${here ? "not defined here" : "removed"}` : "",
    onlyCurrent.length > 0 ? `${QUOTED(onlyCurrent)} ${here ? "defined only here" : "added"}` : "",
  ].filter((part) => part !== "");
  const which = agents !== undefined && parts.length > 0 ? `: ${parts.join("; ")}` : ` (${hashes})`;
  return here
    ? `the agent registry read here differs from the one the server that drove this run recorded${which} ` +
        `(nothing about the run changed; read it where the server's acp-orchestrator.json is, or resume it with the ` +
        `server's --config, to compare with its agents)`
    : `the agent definitions in the registry changed since the run was recorded${which}`;
}
