#!/usr/bin/env node
// A host run-state authority in one file (PROTOCOL.md section 7): answers runState/* requests as NDJSON JSON-RPC on
// stdin/stdout and keeps everything in one JSON file (RUNSTATE_FILE, default ./runstate.json; under check-host, which
// names a scratch directory it removes after, runstate.json there), rewritten atomically (temp file + rename) after
// every write. Check it with: acp-orchestrator check-host -- node examples/json-file-host.mjs
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

const SCRATCH = process.env.ACP_ORCHESTRATOR_CHECK_HOST_DIR;
const FILE = process.env.RUNSTATE_FILE ?? (SCRATCH ? join(SCRATCH, "runstate.json") : "runstate.json");
// records: "projectId\0kind\0id" -> {value, revision, updatedAt}; streams: "projectId\0stream" -> [event, ...]
const db = existsSync(FILE) ? JSON.parse(readFileSync(FILE, "utf8")) : { records: {}, streams: {} };
const save = () => {
  writeFileSync(`${FILE}.tmp`, JSON.stringify(db));
  renameSync(`${FILE}.tmp`, FILE);
};
const key = (...parts) => parts.join("\u0000");
const conflict = (message, data = {}) => Object.assign(new Error(message), { code: -32012, data });
// ids in code-point order, which is UTF-8 byte order (JS `<` compares UTF-16 units)
const byCodePoint = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));

const methods = {
  "runState/get": ({ projectId, kind, id }) => ({ record: db.records[key(projectId, kind, id)] ?? null }),
  "runState/put": ({ projectId, kind, id, value, expectedRevision }) => {
    const k = key(projectId, kind, id);
    const current = db.records[k];
    if ((current?.revision ?? null) !== expectedRevision) {
      throw conflict(
        `${kind}/${id} is at revision ${current?.revision ?? "none"}`,
        current ? { revision: current.revision } : {},
      );
    }
    const revision = (current?.revision ?? 0) + 1;
    db.records[k] = { value, revision, updatedAt: new Date().toISOString() };
    save();
    return { revision };
  },
  "runState/delete": ({ projectId, kind, id, expectedRevision }) => {
    const k = key(projectId, kind, id);
    const current = db.records[k];
    if (!current) return { deleted: false };
    if (expectedRevision !== undefined && expectedRevision !== current.revision) {
      throw conflict(`${kind}/${id} is at revision ${current.revision}`, { revision: current.revision });
    }
    delete db.records[k];
    save();
    return { deleted: true };
  },
  "runState/list": ({ projectId, kind, prefix = "" }) => {
    const start = key(projectId, kind, "");
    const records = Object.entries(db.records)
      .filter(([k]) => k.startsWith(start) && k.slice(start.length).startsWith(prefix))
      .map(([k, r]) => ({ id: k.slice(start.length), revision: r.revision, updatedAt: r.updatedAt }))
      .sort((a, b) => byCodePoint(a.id, b.id));
    return { records };
  },
  "runState/appendEvents": ({ projectId, stream, events, expectedSeq }) => {
    const list = db.streams[key(projectId, stream)] ?? [];
    if (list.length !== expectedSeq) throw conflict(`stream ${stream} is at ${list.length}, not ${expectedSeq}`);
    if (events.length > 0) {
      db.streams[key(projectId, stream)] = [...list, ...events];
      save();
    }
    return { lastSeq: expectedSeq + events.length };
  },
  "runState/readEvents": ({ projectId, stream, afterSeq, limit = Infinity }) => {
    const list = db.streams[key(projectId, stream)] ?? [];
    const events = list.slice(afterSeq, afterSeq + limit).map((event, i) => ({ seq: afterSeq + i + 1, event }));
    return { events, more: afterSeq + events.length < list.length };
  },
  "runState/deleteStream": ({ projectId, stream }) => {
    const deleted = key(projectId, stream) in db.streams;
    delete db.streams[key(projectId, stream)];
    if (deleted) save();
    return { deleted };
  },
};

const send = (message) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "") return;
  const { id, method, params } = JSON.parse(line);
  if (id === undefined) return; // notifications: nothing to do
  const handler = methods[method] ?? methods[method?.replace(/^_/, "")];
  if (!handler) return send({ id, error: { code: -32601, message: `unknown method ${method}` } });
  try {
    send({ id, result: handler(params) });
  } catch (error) {
    send({
      id,
      error: { code: error.code ?? -32603, message: error.message, ...(error.data ? { data: error.data } : {}) },
    });
  }
});
