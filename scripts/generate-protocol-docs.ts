/**
 * Generates protocol/schema.json (JSON Schema of every wire message) and protocol/METHODS.md (the readable method
 * reference) from the zod schemas and the method table in protocol/.
 *
 * Usage: `node dist/scripts/generate-protocol-docs.js [--check]` (or `npx tsx scripts/generate-protocol-docs.ts`).
 * Without flags it writes both files; with `--check` it writes nothing, names each stale file on stderr and exits 1.
 * Output is deterministic: no timestamps, `$defs` sorted by name, everything else in declaration order.
 * This script only reads protocol/ and writes those two files; it must never touch anything else.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as z from "zod";
import { errorCatalog } from "../protocol/errors.js";
import {
  acpServerNotifications,
  clientNotifications,
  hostRequests,
  namedSchemas,
  productMethods,
  acpMethods,
  productNotifications,
  goalMethods,
  goalNotifications,
} from "../protocol/methods.js";
import { Phase } from "../protocol/common.js";
import type { MethodSpec, NotificationSpec } from "../protocol/method-spec.js";

/** A JSON Schema node as zod emits it (only the keywords the renderer reads are typed). */
interface JsonSchema {
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  type?: string | string[];
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
  maxItems?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  description?: string;
  not?: JsonSchema;
  [key: string]: unknown;
}

/** One declared message, flattened for rendering. */
interface Entry {
  readonly method: string;
  readonly extension: boolean;
  readonly summary: string;
  readonly allowedIn?: readonly string[];
  /** `$defs` id of the params schema. */
  readonly paramsId: string;
  /** `$defs` id of the result schema; absent for notifications. */
  readonly resultId?: string;
}

interface Section {
  readonly title: string;
  readonly direction: string;
  readonly entries: readonly Entry[];
}

const DEFS_PREFIX = "#/$defs/";

/** JSON Pointer escaping of one reference token (RFC 6901): `~` → `~0`, `/` → `~1`. */
function pointerToken(id: string): string {
  return id.replace(/~/g, "~0").replace(/\//g, "~1");
}

function refTo(id: string): string {
  return DEFS_PREFIX + pointerToken(id);
}

function idOfRef(ref: string): string {
  return ref.slice(DEFS_PREFIX.length).replace(/~1/g, "/").replace(/~0/g, "~");
}

interface Registered {
  readonly sections: readonly Section[];
  readonly defs: Record<string, JsonSchema>;
}

/**
 * Registers every schema under its definition id and converts the registry to JSON Schema in one pass (io "input":
 * params as a client may write them; results and notifications as a client may receive them, open to new fields
 * unless declared strict). Throws if one schema instance would need two ids (each definition must be its own).
 */
function buildDefinitions(): Registered {
  const registry = z.registry<{ id: string }>();
  const descriptions = new Map<string, string>();
  const add = (id: string, schema: z.ZodType, description?: string): string => {
    if (registry.has(schema)) {
      throw new Error(`schema for ${id} is already registered as ${registry.get(schema)?.id ?? "?"}`);
    }
    registry.add(schema, { id });
    if (description !== undefined) descriptions.set(id, description);
    return id;
  };

  for (const named of namedSchemas) add(named.id, named.schema, named.description);
  for (const entry of errorCatalog) {
    if (entry.data) add(`${entry.name}Data`, entry.data, `\`data\` of error ${entry.code} (${entry.name}).`);
  }

  const methodEntries = (specs: readonly MethodSpec[]): Entry[] =>
    specs.map((m) => ({
      method: m.method,
      extension: m.extension,
      summary: m.summary,
      ...(m.allowedIn ? { allowedIn: m.allowedIn } : {}),
      paramsId: add(`${m.method}.params`, m.params, `Params of \`${m.method}\`.`),
      resultId: add(`${m.method}.result`, m.result, `Result of \`${m.method}\`.`),
    }));
  const notificationEntries = (specs: readonly NotificationSpec[]): Entry[] =>
    specs.map((n) => ({
      method: n.method,
      extension: n.extension,
      summary: n.summary,
      paramsId: add(`${n.method}.notification`, n.params, `Params of the \`${n.method}\` notification.`),
    }));

  const sections: Section[] = [
    { title: "ACP methods", direction: "client → server request", entries: methodEntries(acpMethods) },
    { title: "Product methods", direction: "client → server request", entries: methodEntries(productMethods) },
    { title: "Goal methods", direction: "client → server request", entries: methodEntries(goalMethods) },
    {
      title: "Client notifications",
      direction: "client → server notification",
      entries: notificationEntries(clientNotifications),
    },
    {
      title: "ACP notifications",
      direction: "server → client notification",
      entries: notificationEntries(acpServerNotifications),
    },
    {
      title: "Product notifications",
      direction: "server → client notification",
      entries: notificationEntries(productNotifications),
    },
    {
      title: "Goal notifications",
      direction: "server → client notification",
      entries: notificationEntries(goalNotifications),
    },
    { title: "Requests to the client", direction: "server → client request", entries: methodEntries(hostRequests) },
  ];

  const converted = z.toJSONSchema(registry, { io: "input", uri: refTo }) as {
    schemas: Record<string, JsonSchema>;
  };
  const defs: Record<string, JsonSchema> = {};
  for (const id of Object.keys(converted.schemas).sort()) {
    const { $schema: _schema, $id: _id, ...rest } = converted.schemas[id] as JsonSchema;
    const description = descriptions.get(id);
    defs[id] = description !== undefined && rest.description === undefined ? { description, ...rest } : rest;
  }
  return { sections, defs };
}

function spellings(entry: Entry): string[] {
  return entry.extension ? [entry.method, `_${entry.method}`] : [entry.method];
}

// ---------------------------------------------------------------------------------------------------------------
// schema.json

function renderSchemaJson({ sections, defs }: Registered): string {
  const index = sections.map((section) => ({
    title: section.title,
    direction: section.direction,
    messages: section.entries.map((e) => ({
      method: e.method,
      spellings: spellings(e),
      summary: e.summary,
      ...(e.allowedIn ? { allowedIn: e.allowedIn } : {}),
      params: { $ref: refTo(e.paramsId) },
      ...(e.resultId ? { result: { $ref: refTo(e.resultId) } } : {}),
    })),
  }));
  const errors = errorCatalog.map((e) => ({
    code: e.code,
    name: e.name,
    when: e.when,
    ...(e.data ? { data: { $ref: refTo(`${e.name}Data`) } } : {}),
  }));
  const document = {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    title: "acp-orchestrator wire protocol, version 1",
    description:
      "Generated from the zod schemas in protocol/ by scripts/generate-protocol-docs.ts; do not edit. " +
      "Definitions are named `<method>.params`, `<method>.result` and `<method>.notification`.",
    "x-messages": index,
    "x-errors": errors,
    $defs: defs,
  };
  return `${JSON.stringify(document, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// METHODS.md

/**
 * Whether a property is left out of the reference: a generic `_meta` (an open object, allowed on every object, see
 * the conventions paragraph). A `_meta` with declared properties, such as this server's capability flags, is shown.
 */
function isHidden(key: string, value: JsonSchema): boolean {
  if (key !== "_meta") return false;
  const variants = value.anyOf ?? value.oneOf ?? [value];
  return variants.every((v) => v.type === "null" || (v.type === "object" && v.properties === undefined));
}

/** Properties of an object schema that the reference shows, in declaration order. */
function shownProperties(s: JsonSchema): [string, JsonSchema][] {
  return Object.entries(s.properties ?? {}).filter(([k, v]) => !isHidden(k, v));
}

/** A property name as TypeScript would write it. */
function propertyName(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key);
}

function isNullSchema(s: JsonSchema): boolean {
  return s.type === "null";
}

/** Renders a JSON Schema node as a short TypeScript-like type, inlining small objects up to `depth` levels. */
function renderType(s: JsonSchema, depth = 2): string {
  if (s.$ref !== undefined) return idOfRef(s.$ref);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum !== undefined) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  const union = s.anyOf ?? s.oneOf;
  if (union !== undefined) {
    const parts = union.filter((u) => !isNullSchema(u)).map((u) => renderType(u, depth));
    if (union.some(isNullSchema)) parts.push("null");
    return parts.join(" | ");
  }
  if (s.allOf !== undefined) return s.allOf.map((u) => renderType(u, depth)).join(" & ");
  if (s.not !== undefined && Object.keys(s.not).length === 0) return "never";
  const type = Array.isArray(s.type) ? s.type.join(" | ") : s.type;
  switch (type) {
    case "array": {
      if (s.maxItems === 0 || (s.prefixItems !== undefined && s.prefixItems.length === 0)) return "[]";
      const item = s.items ? renderType(s.items, depth) : "unknown";
      return /[ |]/.test(item) && !item.startsWith("{") ? `(${item})[]` : `${item}[]`;
    }
    case "object": {
      const props = shownProperties(s);
      if (props.length === 0) {
        if (typeof s.additionalProperties === "object" && Object.keys(s.additionalProperties).length > 0) {
          return `{[key: string]: ${renderType(s.additionalProperties, depth)}}`;
        }
        return s.properties !== undefined ? "{}" : "object";
      }
      if (depth <= 0) return "object";
      const required = new Set(s.required ?? []);
      const fields = props.map(
        ([k, v]) => `${propertyName(k)}${required.has(k) ? "" : "?"}: ${renderType(v, depth - 1)}`,
      );
      return `{${fields.join(", ")}}`;
    }
    case undefined:
      return "unknown";
    default:
      return type;
  }
}

function cell(text: string): string {
  return text.replace(/\|/g, "\\|");
}

/** Follows one `$ref` to its definition. */
function deref(s: JsonSchema, defs: Record<string, JsonSchema>): JsonSchema {
  return s.$ref !== undefined ? (defs[idOfRef(s.$ref)] ?? s) : s;
}

/** A field table for an object schema, or one line naming the type for anything else. */
function renderFields(schema: JsonSchema, defs: Record<string, JsonSchema>): string[] {
  const s = deref(schema, defs);
  const props = shownProperties(s);
  if (s.type !== "object" || props.length === 0) {
    return [s.type === "object" ? "_No fields._" : `Type: \`${renderType(s)}\``];
  }
  const required = new Set(s.required ?? []);
  const lines = ["| field | type | required |", "|---|---|---|"];
  for (const [key, value] of props) {
    lines.push(`| \`${key}\` | \`${cell(renderType(value, 3))}\` | ${required.has(key) ? "yes" : "no"} |`);
  }
  if (s.additionalProperties === false) lines.push("", "Unknown keys are rejected (-32602).");
  return lines;
}

function renderAllowedIn(entry: Entry): string | undefined {
  if (!entry.method.startsWith("product.") || entry.resultId === undefined) return undefined;
  if (entry.allowedIn === undefined) return "Allowed in: any time (not tied to an existing product's phase).";
  const all = Phase.options;
  if (entry.allowedIn.length === all.length && all.every((p) => entry.allowedIn?.includes(p))) {
    return "Allowed in: any phase.";
  }
  return `Allowed in: ${entry.allowedIn.map((p) => `\`${p}\``).join(", ")}.`;
}

/** A variant list for discriminated unions (`Mutation`, `SessionUpdate`, …), else the field table. */
function renderNamed(schema: JsonSchema, defs: Record<string, JsonSchema>): string[] {
  const union = schema.oneOf ?? schema.anyOf;
  if (union !== undefined && union.every((u) => deref(u, defs).type === "object")) {
    return union.map((u) => `- \`${renderType(deref(u, defs), 2)}\``);
  }
  return renderFields(schema, defs);
}

function renderMethodsMd({ sections, defs }: Registered): string {
  const out: string[] = [
    "# acp-orchestrator protocol reference",
    "",
    "<!-- Generated from protocol/*.ts by scripts/generate-protocol-docs.ts. Do not edit; run `npm run build`. -->",
    "",
    "The zod schemas in `protocol/` are the source of truth; `protocol/schema.json` has the same content as JSON",
    "Schema. Extension methods are served under two spellings, the bare name and the ACP spelling with a leading",
    "`_`. Every params object may also carry an optional `_meta` object, and every ACP object accepts `_meta` and",
    "unknown future fields; `_meta` is left out of the tables below. A `?` after a field name means optional.",
    "",
  ];

  out.push("## Contents", "");
  for (const section of sections) {
    out.push(`- ${section.title} (${section.direction})`);
  }
  out.push("- Shared types", "- Errors", "");

  for (const section of sections) {
    out.push(`## ${section.title}`, "", `Direction: ${section.direction}.`, "");
    for (const entry of section.entries) {
      out.push(`### \`${entry.method}\``, "");
      out.push(
        `Spelling${entry.extension ? "s" : ""}: ${spellings(entry)
          .map((n) => `\`${n}\``)
          .join(", ")}`,
        "",
      );
      out.push(entry.summary, "");
      const allowed = renderAllowedIn(entry);
      if (allowed !== undefined) out.push(allowed, "");
      const paramsSchema = defs[entry.paramsId];
      if (paramsSchema === undefined) throw new Error(`missing definition ${entry.paramsId}`);
      out.push("**Params**", "", ...renderFields(paramsSchema, defs), "");
      if (entry.resultId !== undefined) {
        const resultSchema = defs[entry.resultId];
        if (resultSchema === undefined) throw new Error(`missing definition ${entry.resultId}`);
        out.push("**Result**", "", ...renderFields(resultSchema, defs), "");
      }
    }
  }

  out.push("## Shared types", "");
  for (const named of namedSchemas) {
    const schema = defs[named.id];
    if (schema === undefined) throw new Error(`missing definition ${named.id}`);
    out.push(`### ${named.id}`, "", named.description, "", ...renderNamed(schema, defs), "");
  }

  out.push("## Errors", "", "| code | name | when | `data` |", "|---|---|---|---|");
  for (const entry of errorCatalog) {
    const data = entry.data ? defs[`${entry.name}Data`] : undefined;
    const dataText = data ? `\`${cell(renderType(data, 3))}\`` : "—";
    out.push(`| ${entry.code} | ${entry.name} | ${cell(entry.when)} | ${dataText} |`);
  }
  out.push("");
  return `${out
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// Entry points

/**
 * Renders both generated files from the current schemas. Pure apart from reading module state; writes nothing.
 * Throws if the method table declares one schema instance for two messages.
 */
export function renderProtocolDocs(): { schemaJson: string; methodsMd: string } {
  const registered = buildDefinitions();
  return { schemaJson: renderSchemaJson(registered), methodsMd: renderMethodsMd(registered) };
}

/** The repository root: the nearest directory above this script that holds a package.json (works from dist/ too). */
export function repositoryRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("no package.json above the script; cannot find the repository root");
    dir = parent;
  }
  return dir;
}

/** Paths of the generated files, relative to the repository root. */
export const GENERATED_FILES = { schemaJson: "protocol/schema.json", methodsMd: "protocol/METHODS.md" } as const;

function readOrEmpty(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8") : "";
}

/** Writes (or, with `check`, compares) the generated files; returns the process exit code. */
function main(args: readonly string[]): number {
  const check = args.includes("--check");
  const root = repositoryRoot();
  const rendered = renderProtocolDocs();
  let stale = 0;
  for (const key of ["schemaJson", "methodsMd"] as const) {
    const path = join(root, GENERATED_FILES[key]);
    if (readOrEmpty(path) === rendered[key]) continue;
    if (check) {
      process.stderr.write(`${GENERATED_FILES[key]} is stale; run \`npm run build\` to regenerate it.\n`);
      stale += 1;
    } else {
      writeFileSync(path, rendered[key]);
      process.stderr.write(`wrote ${GENERATED_FILES[key]}\n`);
    }
  }
  return stale > 0 ? 1 : 0;
}

const invokedPath = process.argv[1];
if (invokedPath !== undefined && realpathSync(invokedPath) === realpathSync(fileURLToPath(import.meta.url))) {
  process.exitCode = main(process.argv.slice(2));
}
