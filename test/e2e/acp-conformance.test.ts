/**
 * ACP conformance over real stdio with the official SDK client (issue 31): each capability the server advertises,
 * checked the way the ACP docs state it, where the acp-tck kit failed or skipped at 7314467.
 *
 * - `session/load` (ACP session-setup, "Loading Sessions"): the whole conversation and every other update of the
 *   session (mode, config options, commands, plan, tool calls) arrive as `session/update` before the answer, and none
 *   after it, also while another session's product executes in the background and the machine is loaded.
 * - `sessionCapabilities.additionalDirectories`: absolute existing roots accepted on new/resume, refused otherwise,
 *   persisted and shown in `session/list`.
 * - `promptCapabilities.image`: an image prompt resolves, is replayed by load, and is stored once, by reference.
 * - `promptCapabilities.embeddedContext` (and the baseline `resource_link`): embedded text and blob resources and a
 *   link resolve, load replays them before its answer, a blob is stored once by reference and bounded by its length.
 * - Version negotiation: an unsupported version is answered with `1`; an unknown method is `-32601`.
 * - `session/set_config_option`: values with real choices change, the answer is the complete list, the next product
 *   uses them.
 * - `session/close` while a prompt is in flight: the prompt resolves `cancelled`, the product is left paused and can
 *   be resumed after `session/load`.
 * - The session's inputs reach the agents (ACP leader and workers, scripted agents over stdio) only as each advertises:
 *   `additionalDirectories` in `session/new` and as roots of its `fs/*` requests when it advertises
 *   `sessionCapabilities.additionalDirectories`; images and blob resources as `image` / `resource` blocks when it
 *   advertises `promptCapabilities.image` / `embeddedContext`, else a `resource_link` or a text note.
 *
 * Order is read from the server's stdout itself (one line per message), not from the SDK's dispatch.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import Database from "better-sqlite3";
import { client, ndJsonStream, type ClientContext } from "@agentclientprotocol/sdk";
import { afterAll, describe, expect, it } from "vitest";
import { fixturesDir, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { watchWire } from "../support/acp-schema.js";
import { CLI, tempDir } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

type Msg = { id?: number | string; method?: string; params?: Record<string, unknown>; result?: unknown };
interface Update {
  sessionUpdate: string;
  content?: { type: string; text?: string; data?: string; mimeType?: string };
  toolCallId?: string;
  status?: string;
  configOptions?: { id: string; currentValue: string; options: { value: string }[] }[];
}

const children = new Set<ChildProcessWithoutNullStreams>();
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
});

/** A 1×1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

interface Harness {
  /** Every message the server wrote, in stdout order. */
  out: Msg[];
  statePath: string;
  /** Updates of one session in stdout order, with their index in `out`. */
  updates(sessionId: string): { at: number; update: Update }[];
  /** Index in `out` of the answer to the request the SDK sent as JSON-RPC id `id`. */
  answerAt(pred: (m: Msg) => boolean): number;
  exited: Promise<number | null>;
}

/**
 * Runs the built server with `config` (an agent registry) and drives it with the official SDK client through `op`;
 * then ends the server's stdin (the SDK's connectWith does not) and resolves with its exit code.
 */
async function withServer(
  options: {
    statePath?: string;
    agents?: object[];
    /** More fields of the config file (e.g. `leader`). */
    config?: Record<string, unknown>;
    permission?: (params: Record<string, unknown>) => unknown;
  },
  op: (ctx: ClientContext, h: Harness) => Promise<void>,
): Promise<number | null> {
  const base = tempDir("acp-conf-");
  const args = ["serve", "--state", options.statePath ?? join(base, "state.db")];
  if (options.agents) {
    const config = join(base, "acp-orchestrator.json");
    writeFileSync(config, JSON.stringify({ ...options.config, agents: options.agents }));
    args.push("--config", config);
  }
  const child = spawn(process.execPath, [CLI, ...args], { cwd: base, stdio: ["pipe", "pipe", "pipe"] });
  children.add(child);
  watchWire(child);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const out: Msg[] = [];
  let buffer = "";
  const pass = new PassThrough();
  child.stdout.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    let i: number;
    while ((i = buffer.indexOf("\n")) >= 0) {
      out.push(JSON.parse(buffer.slice(0, i)) as Msg);
      buffer = buffer.slice(i + 1);
    }
    pass.write(chunk);
  });
  child.stdout.on("end", () => pass.end());
  const h: Harness = {
    out,
    statePath: args[2]!,
    exited,
    updates: (sessionId) =>
      out.flatMap((m, at) =>
        m.method === "session/update" && m.params?.sessionId === sessionId
          ? [{ at, update: m.params.update as Update }]
          : [],
      ),
    answerAt: (pred) => out.findIndex((m) => m.method === undefined && pred(m)),
  };
  const app = client({ name: "acp-conformance" }).onRequest("session/request_permission", (ctx) => {
    const answer = options.permission?.(ctx.params as unknown as Record<string, unknown>);
    return (answer ?? { outcome: { outcome: "selected", optionId: "confirm" } }) as never;
  });
  try {
    await app.connectWith(
      ndJsonStream(
        Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
        Readable.toWeb(pass) as ReadableStream<Uint8Array>,
      ),
      async (ctx) => {
        await ctx.request("initialize", {
          protocolVersion: 1,
          clientCapabilities: {},
          clientInfo: { name: "acp-conformance", version: "1" },
        });
        await op(ctx, h);
      },
    );
  } catch (err) {
    throw new Error(`${String(err)}\nstderr: ${stderr.slice(-3000)}`);
  } finally {
    child.stdin.end();
  }
  return exited;
}

async function waitUntil(what: string, cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A worker that never ends its turn on its own (honours session/cancel). */
const HANG = {
  agentId: "hang",
  command: process.execPath,
  args: ["--import", tsxLoader, join(fixturesDir, "fs-agent.ts"), "hang"],
};
const revise = { outcome: { outcome: "selected", optionId: "revise" } };
const text = (t: string) => [{ type: "text" as const, text: t }];

/** `session/prompt` (typed loosely: the content blocks of these tests). */
function prompt(ctx: ClientContext, sessionId: string, blocks: object[]): Promise<{ stopReason: string }> {
  return ctx.request<{ stopReason: string }>("session/prompt", { sessionId, prompt: blocks });
}

/** Keeps one core busy for as long as it runs (the "loaded machine" of issue 31). */
function burnCpu(): ChildProcessWithoutNullStreams {
  const burner = spawn(process.execPath, ["-e", "for(;;){}"], { stdio: ["pipe", "pipe", "pipe"] });
  children.add(burner);
  return burner;
}

describe("ACP conformance (official SDK client over stdio)", () => {
  it("advertises image and embedded context prompts, close and additionalDirectories", async () => {
    const code = await withServer({}, async (ctx) => {
      const init = await ctx.request("initialize", {
        protocolVersion: 1,
        clientCapabilities: {},
        clientInfo: { name: "acp-conformance", version: "1" },
      });
      expect(init.agentCapabilities?.loadSession).toBe(true);
      expect(init.agentCapabilities?.promptCapabilities).toEqual({ image: true, audio: false, embeddedContext: true });
      expect(init.agentCapabilities?.sessionCapabilities).toMatchObject({
        list: {},
        close: {},
        resume: {},
        additionalDirectories: {},
      });
    });
    expect(code).toBe(0);
  });

  it("session/load: every update of the session before the answer, none after, with a product executing beside it", async () => {
    const workspace = tempDir("acp-conf-ws-");
    const burner = burnCpu();
    try {
      const code = await withServer({ agents: [HANG], permission: () => revise }, async (ctx, h) => {
        // Session B: a conversation with a plan (revised: the turn ends), then closed.
        const b = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
        expect(
          (
            await ctx.request<{ stopReason: string }>("session/prompt", {
              sessionId: b.sessionId,
              prompt: text("- Write the parser\n- Then test it"),
            })
          ).stopReason,
        ).toBe("end_turn");
        expect(await ctx.request("session/close", { sessionId: b.sessionId })).toEqual({});

        // Session A: auto mode, its product executes on a worker that never finishes.
        const a = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
        await ctx.request("session/set_mode", { sessionId: a.sessionId, modeId: "auto" });
        const turnA = ctx.request<{ stopReason: string }>("session/prompt", {
          sessionId: a.sessionId,
          prompt: text("Describe the architecture"),
        });
        await waitUntil("A's task in progress", () =>
          h
            .updates(a.sessionId)
            .some((u) => u.update.sessionUpdate.startsWith("tool_call") && u.update.status === "in_progress"),
        );

        const beforeLoad = h.out.length;
        const loaded = await ctx.request("session/load", { sessionId: b.sessionId, cwd: workspace, mcpServers: [] });
        const answer = h.answerAt((m) => m.result === loaded || JSON.stringify(m.result) === JSON.stringify(loaded));
        expect(answer).toBeGreaterThan(beforeLoad);
        const replay = h.updates(b.sessionId).filter((u) => u.at >= beforeLoad);
        const kinds = replay.map((u) => u.update.sessionUpdate);
        for (const kind of [
          "user_message_chunk",
          "agent_message_chunk",
          "session_info_update",
          "current_mode_update",
          "config_option_update",
          "available_commands_update",
          "plan",
        ]) {
          expect(kinds, kind).toContain(kind);
        }
        expect(kinds[0]).toBe("user_message_chunk");
        expect(replay.every((u) => u.at < answer)).toBe(true);
        expect(loaded.configOptions?.map((o) => o.id)).toEqual(["leader", "parallelism", "isolation", "integration"]);

        // A's product keeps executing and talking to A; B hears nothing until the client asks something of it.
        const aBefore = h.updates(a.sessionId).length;
        await ctx.notify("session/cancel", { sessionId: a.sessionId });
        expect((await turnA).stopReason).toBe("cancelled");
        expect(h.updates(a.sessionId).length).toBeGreaterThan(aBefore);
        await ctx.request("session/list", {});
        expect(h.updates(b.sessionId).filter((u) => u.at > answer)).toEqual([]);
      });
      expect(code).toBe(0);
    } finally {
      burner.kill("SIGKILL");
    }
  });

  it("additionalDirectories: accepted when absolute and existing, refused otherwise, persisted and in session/list", async () => {
    const workspace = tempDir("acp-conf-ws-");
    const extra = tempDir("acp-conf-extra-");
    const other = tempDir("acp-conf-other-");
    const statePath = join(tempDir(), "state.db");
    let sessionId = "";
    expect(
      await withServer({ statePath }, async (ctx) => {
        const s = await ctx.request("session/new", { cwd: workspace, mcpServers: [], additionalDirectories: [extra] });
        sessionId = s.sessionId;
        const listed = await ctx.request("session/list", {});
        expect(listed.sessions).toEqual([
          expect.objectContaining({ sessionId, cwd: workspace, additionalDirectories: [extra] }),
        ]);
        for (const [dirs, path] of [
          [["relative/dir"], ["additionalDirectories", 0]],
          [[join(extra, "missing")], ["additionalDirectories", 0]],
          [
            [extra, join(extra, "nope")],
            ["additionalDirectories", 1],
          ],
        ] as const) {
          const refused = await ctx
            .request("session/new", { cwd: workspace, mcpServers: [], additionalDirectories: [...dirs] })
            .catch((e: unknown) => e);
          expect(refused).toMatchObject({ code: -32602 });
          expect(JSON.stringify((refused as { data: unknown }).data)).toContain(JSON.stringify(path).slice(1, -1));
        }
        expect((await ctx.request("session/list", {})).sessions).toHaveLength(1);
      }),
    ).toBe(0);
    // After a restart: still there; resume with another list replaces it (ACP: the complete resulting list).
    expect(
      await withServer({ statePath }, async (ctx) => {
        expect((await ctx.request("session/list", { cwd: workspace })).sessions[0]?.additionalDirectories).toEqual([
          extra,
        ]);
        await ctx.request("session/resume", { sessionId, cwd: workspace, additionalDirectories: [other, extra] });
        expect((await ctx.request("session/list", {})).sessions[0]?.additionalDirectories).toEqual([other, extra]);
        await ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
        expect((await ctx.request("session/list", {})).sessions[0]?.additionalDirectories).toBeUndefined();
      }),
    ).toBe(0);
  });

  it("an image prompt resolves, is replayed by session/load and stored once by reference; oversize and audio are refused", async () => {
    const workspace = tempDir("acp-conf-ws-");
    const statePath = join(tempDir(), "state.db");
    let sessionId = "";
    expect(
      await withServer({ statePath, permission: () => revise }, async (ctx, h) => {
        sessionId = (await ctx.request("session/new", { cwd: workspace, mcpServers: [] })).sessionId;
        const turn = await ctx.request<{ stopReason: string }>("session/prompt", {
          sessionId,
          prompt: [
            { type: "text", text: "- Make the logo match this picture" },
            { type: "image", data: PNG, mimeType: "image/png" },
          ],
        });
        expect(turn.stopReason).toBe("end_turn");
        // Over the 512 KiB limit, within the 1 MiB input bound: refused by its length, before any decoding.
        const oversize = "A".repeat(800_000);
        const refused = await ctx
          .request("session/prompt", { sessionId, prompt: [{ type: "image", data: oversize, mimeType: "image/png" }] })
          .catch((e: unknown) => e);
        expect(refused).toMatchObject({ code: -32602 });
        expect(JSON.stringify((refused as { data: unknown }).data)).toContain("at most 524288 bytes");
        const audio = await ctx
          .request("session/prompt", { sessionId, prompt: [{ type: "audio", data: "AAAA", mimeType: "audio/wav" }] })
          .catch((e: unknown) => e);
        expect(audio).toMatchObject({ code: -32602 });
        const mark = h.out.length;
        await ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
        const images = h
          .updates(sessionId)
          .filter(
            (u) =>
              u.at >= mark && u.update.sessionUpdate === "user_message_chunk" && u.update.content?.type === "image",
          );
        expect(images.map((u) => u.update.content)).toEqual([{ type: "image", data: PNG, mimeType: "image/png" }]);
      }),
    ).toBe(0);
    const db = new Database(statePath, { readonly: true });
    try {
      const records = db.prepare("SELECT kind, value FROM records").all() as { kind: string; value: string }[];
      const events = db.prepare("SELECT event FROM events").all() as { event: string }[];
      const holding = [...records.map((r) => [r.kind, r.value]), ...events.map((e) => ["event", e.event])].filter(
        ([, v]) => v!.includes(PNG),
      );
      expect(holding.map(([k]) => k)).toEqual(["attachment"]);
      expect(events.some((e) => e.event.includes(`attachment ${sessionId}/`))).toBe(true);
    } finally {
      db.close();
    }
  });

  it("embeddedContext and resource_link: an embedded text resource, a blob resource and a link resolve; load replays them, a blob by reference", async () => {
    const workspace = tempDir("acp-conf-ws-");
    const statePath = join(tempDir(), "state.db");
    const blob = Buffer.from("binary design notes").toString("base64");
    const blocks = [
      { type: "text", text: "- Follow the attached notes" },
      { type: "resource_link", uri: "file:///tmp/spec.md", name: "spec.md" },
      { type: "resource", resource: { uri: "file:///tmp/notes.md", text: "Use tabs.", mimeType: "text/markdown" } },
      { type: "resource", resource: { uri: "file:///tmp/notes.bin", blob, mimeType: "application/octet-stream" } },
    ];
    expect(
      await withServer({ statePath, permission: () => revise }, async (ctx, h) => {
        const sessionId = (await ctx.request("session/new", { cwd: workspace, mcpServers: [] })).sessionId;
        // ACP initialization.mdx, Prompt capabilities: text and resource_link always; resource with embeddedContext.
        expect((await prompt(ctx, sessionId, blocks)).stopReason).toBe("end_turn");
        // A blob resource over the attachment limit is refused by its length, before decoding.
        const big = { type: "resource", resource: { uri: "file:///b", blob: "A".repeat(800_000) } };
        expect(await prompt(ctx, sessionId, [big]).catch((e: unknown) => e)).toMatchObject({ code: -32602 });
        const mark = h.out.length;
        await ctx.request("session/load", { sessionId, cwd: workspace, mcpServers: [] });
        const answer = h.answerAt((m) => m.id !== undefined && h.out.indexOf(m) >= mark);
        const replayed = h
          .updates(sessionId)
          .filter((u) => u.at >= mark && u.update.sessionUpdate === "user_message_chunk")
          .map((u) => ({ at: u.at, content: u.update.content as Record<string, unknown> }));
        // Every block of the user's message comes back before the load's answer (ACP session-setup, Loading Sessions).
        expect(replayed.every((u) => u.at < answer)).toBe(true);
        const all = JSON.stringify(replayed.map((u) => u.content));
        expect(all).toContain("Follow the attached notes");
        expect(all).toContain("file:///tmp/spec.md");
        expect(all).toContain("Use tabs.");
        expect(all).toContain(blob);
      }),
    ).toBe(0);
    const db = new Database(statePath, { readonly: true });
    try {
      const events = db.prepare("SELECT event FROM events").all() as { event: string }[];
      const records = db.prepare("SELECT kind, value FROM records").all() as { kind: string; value: string }[];
      // The blob is stored once, as an attachment record; no event carries its bytes.
      expect(events.some((e) => e.event.includes(blob))).toBe(false);
      expect(records.filter((r) => r.value.includes(blob)).map((r) => r.kind)).toEqual(["attachment"]);
    } finally {
      db.close();
    }
  });

  it("initialize: a version it does not support is answered with its own (1); an unknown method is -32601", async () => {
    const code = await withServer({}, async (ctx) => {
      // ACP initialization.mdx, Version Negotiation: respond with the latest version supported, never an error.
      const init = await ctx.request("initialize", {
        protocolVersion: 65535,
        clientCapabilities: {},
        clientInfo: { name: "acp-conformance", version: "1" },
      });
      expect(init.protocolVersion).toBe(1);
      const unknown = await ctx.request("session/unknown_method", {}).catch((e: unknown) => e);
      expect(unknown).toMatchObject({ code: -32601 });
    });
    expect(code).toBe(0);
  });

  it("set_config_option: real choices, the complete list back, applied to the session's next product", async () => {
    const workspace = tempDir("acp-conf-ws-");
    const statePath = join(tempDir(), "state.db");
    expect(
      await withServer({ statePath, agents: [HANG], permission: () => revise }, async (ctx) => {
        const s = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
        const ids = ["leader", "parallelism", "isolation", "integration"];
        expect(s.configOptions?.map((o) => o.id)).toEqual(ids);
        const values = (id: string) =>
          (s.configOptions?.find((o) => o.id === id) as { options: { value: string }[] }).options.map((o) => o.value);
        expect(values("leader")).toEqual(["heuristic", "hang"]);
        expect(values("isolation")).toEqual(["worktree", "shared"]);
        expect(values("integration")).toEqual(["branch", "merge"]);
        expect(values("parallelism").length).toBeGreaterThan(1);
        let last;
        for (const [configId, value] of [
          ["leader", "hang"],
          ["leader", "heuristic"],
          ["parallelism", "1"],
          ["isolation", "shared"],
          ["integration", "merge"],
        ] as const) {
          last = await ctx.request("session/set_config_option", { sessionId: s.sessionId, configId, value });
          expect(last.configOptions.map((o) => o.id)).toEqual(ids);
          expect(last.configOptions.find((o) => o.id === configId)?.currentValue).toBe(value);
        }
        expect(
          Object.fromEntries(last!.configOptions.map((o) => [o.id, (o as { currentValue: string }).currentValue])),
        ).toEqual({
          leader: "heuristic",
          parallelism: "1",
          isolation: "shared",
          integration: "merge",
        });
        await prompt(ctx, s.sessionId, text("- Write the parser"));
      }),
    ).toBe(0);
    const db = new Database(statePath, { readonly: true });
    try {
      const created = (db.prepare("SELECT event FROM events WHERE seq = 1").all() as { event: string }[]).map(
        (e) => JSON.parse(e.event) as Record<string, unknown>,
      );
      expect(created).toEqual([
        expect.objectContaining({
          type: "created",
          maxParallelTasks: 1,
          isolation: "shared",
          integration: { mode: "merge" },
        }),
      ]);
    } finally {
      db.close();
    }
  });

  it("session/close in flight: the prompt resolves cancelled, the product stays paused and resumes after session/load", async () => {
    const workspace = tempDir("acp-conf-ws-");
    mkdirSync(join(workspace, "src"));
    let held = 0;
    const code = await withServer(
      {
        agents: [HANG],
        // The first plan question is never answered (the close must still end that turn).
        permission: () =>
          held++ === 0 ? new Promise(() => {}) : { outcome: { outcome: "selected", optionId: "confirm" } },
      },
      async (ctx, h) => {
        // In confirm mode, while the server waits on session/request_permission.
        const first = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
        const asking = ctx.request<{ stopReason: string }>("session/prompt", {
          sessionId: first.sessionId,
          prompt: text("- Write the parser"),
        });
        await waitUntil("the plan question", () => h.out.some((m) => m.method === "session/request_permission"));
        const beforeFirstClose = h.out.length;
        expect(await ctx.request("session/close", { sessionId: first.sessionId })).toEqual({});
        expect((await asking).stopReason).toBe("cancelled");
        const firstAnswers = h.out.slice(beforeFirstClose).filter((m) => m.method === undefined && "result" in m);
        expect(firstAnswers.map((m) => m.result)).toEqual([{ stopReason: "cancelled" }, {}]);

        // While a product executes.
        const s = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
        await ctx.request("session/set_mode", { sessionId: s.sessionId, modeId: "auto" });
        const turn = ctx.request<{ stopReason: string }>("session/prompt", {
          sessionId: s.sessionId,
          prompt: text("Describe the architecture"),
        });
        const running = () =>
          h
            .updates(s.sessionId)
            .filter((u) => u.update.sessionUpdate.startsWith("tool_call") && u.update.status === "in_progress").length;
        await waitUntil("a running task", () => running() > 0);
        const closedAt = Date.now();
        const beforeClose = h.out.length;
        expect(await ctx.request("session/close", { sessionId: s.sessionId })).toEqual({});
        expect((await turn).stopReason).toBe("cancelled");
        expect(Date.now() - closedAt).toBeLessThan(5_000);
        // The cancelled prompt is answered (its workers stopped, the product paused) before the close is.
        const answers = h.out.slice(beforeClose).filter((m) => m.method === undefined && "result" in m);
        expect(answers.map((m) => m.result)).toEqual([{ stopReason: "cancelled" }, {}]);
        const refused = await ctx
          .request("session/prompt", { sessionId: s.sessionId, prompt: text("/status") })
          .catch((e: unknown) => e);
        expect(refused).toMatchObject({ code: -32002 });

        await ctx.request("session/load", { sessionId: s.sessionId, cwd: workspace, mcpServers: [] });
        const mark = h.out.length;
        expect((await prompt(ctx, s.sessionId, text("/status"))).stopReason).toBe("end_turn");
        const said = h
          .updates(s.sessionId)
          .filter((u) => u.at >= mark && u.update.sessionUpdate === "agent_message_chunk")
          .map((u) => u.update.content?.text)
          .join("");
        expect(said).toContain("paused");
        const before = running();
        const resumed = prompt(ctx, s.sessionId, text("resume"));
        await waitUntil("the task running again", () => running() > before);
        await ctx.notify("session/cancel", { sessionId: s.sessionId });
        expect((await resumed).stopReason).toBe("cancelled");
      },
    );
    expect(code).toBe(0);
  });
});

describe("ACP conformance: the session's inputs reach the agents as each advertises (scripted ACP agents over stdio)", () => {
  it("additionalDirectories and attachments: given to agents that advertise them, links and notes to the others", async () => {
    const base = tempDir("acp-conf-agents-");
    const workspace = tempDir("acp-conf-ws-");
    const extra = tempDir("acp-conf-extra-");
    writeFileSync(join(extra, "notes.txt"), "shared notes");
    const statePath = join(tempDir(), "state.db");
    const blob = Buffer.from("binary spec").toString("base64");
    const plan = {
      name: "Logo",
      summary: "Two workers, one per capability set.",
      instances: [
        { instanceId: "w1", agentId: "rich", role: "worker" },
        { instanceId: "w2", agentId: "plain", role: "worker" },
      ],
      tasks: [
        { taskId: "t1", title: "Draw it", description: "Use the picture.", instanceId: "w1", dependsOn: [] },
        { taskId: "t2", title: "Describe it", description: "Use the spec.", instanceId: "w2", dependsOn: [] },
      ],
    };
    const fsActions = (who: string) => [
      { write: { path: join(extra, `${who}.txt`), content: `written by ${who}` } },
      { read: { path: join(extra, "notes.txt") } },
    ];
    const everything = {
      promptCapabilities: { image: true, embeddedContext: true },
      sessionCapabilities: { additionalDirectories: {} },
    };
    const agent = (agentId: string, body: Record<string, unknown>) => {
      const file = join(base, `${agentId}.script.json`);
      writeFileSync(file, JSON.stringify({ ...body, name: agentId, log: join(base, `${agentId}.jsonl`) }));
      return {
        agentId,
        command: process.execPath,
        args: [...SCRIPTED_AGENT_ARGS],
        env: { SCRIPTED_AGENT_SCRIPT: file },
      };
    };
    const leaderScript = { leader: { plan: [{ text: "Two tasks.", json: plan }] } };
    const agents = [
      agent("lead", { ...leaderScript, agentCapabilities: everything }),
      agent("plainlead", leaderScript),
      agent("rich", { agentCapabilities: everything, worker: { default: { actions: fsActions("rich"), text: "ok" } } }),
      agent("plain", { worker: { default: { actions: fsActions("plain"), text: "ok" } } }),
    ];
    const blocks = [
      { type: "text", text: "Make the logo match this picture and the attached spec." },
      { type: "image", data: PNG, mimeType: "image/png" },
      { type: "resource", resource: { uri: "file:///tmp/spec.bin", blob, mimeType: "application/octet-stream" } },
    ];
    const log = (agentId: string) =>
      readFileSync(join(base, `${agentId}.jsonl`), "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    // Both sessions' plans are revised when asked (only the auto session's product runs).
    const options = { statePath, agents, config: { leader: "lead" }, permission: () => revise };
    const code = await withServer(options, async (ctx) => {
      // Auto mode with the leader "lead" (image, embeddedContext, additionalDirectories): plans, both tasks run.
      const s = await ctx.request("session/new", { cwd: workspace, mcpServers: [], additionalDirectories: [extra] });
      await ctx.request("session/set_mode", { sessionId: s.sessionId, modeId: "auto" });
      expect((await prompt(ctx, s.sessionId, blocks)).stopReason).toBe("end_turn");
      // Confirm mode with "plainlead" (advertises nothing): its plan turn only, the plan revised.
      const p = await ctx.request("session/new", { cwd: workspace, mcpServers: [], additionalDirectories: [extra] });
      await ctx.request("session/set_config_option", {
        sessionId: p.sessionId,
        configId: "leader",
        value: "plainlead",
      });
      expect((await prompt(ctx, p.sessionId, blocks)).stopReason).toBe("end_turn");
    });
    expect(code).toBe(0);

    const image = { type: "image", data: PNG, mimeType: "image/png" };
    const resource = {
      type: "resource",
      resource: { uri: "file:///tmp/spec.bin", blob, mimeType: "application/octet-stream" },
    };
    const link = {
      type: "resource_link",
      uri: "file:///tmp/spec.bin",
      name: "spec.bin",
      mimeType: "application/octet-stream",
      size: 11,
    };
    const sessionNew = (agentId: string) => log(agentId).find((e) => e.event === "session/new");
    const promptOf = (agentId: string) =>
      log(agentId).find((e) => e.event === "prompt") as { text: string; blocks: unknown[] };
    // ACP session-setup: the directories only to agents that advertise sessionCapabilities.additionalDirectories.
    expect(sessionNew("lead")?.additionalDirectories).toEqual([extra]);
    expect(sessionNew("rich")?.additionalDirectories).toEqual([extra]);
    expect(sessionNew("plainlead")?.additionalDirectories).toBeNull();
    expect(sessionNew("plain")?.additionalDirectories).toBeNull();
    // ACP initialization.mdx, prompt capabilities: image and resource blocks only where advertised.
    expect(promptOf("lead").blocks).toEqual([image, resource]);
    expect(promptOf("rich").blocks).toEqual([image, resource]);
    expect(promptOf("rich").text).toContain(`and the additional directories ${extra} (shared, not isolated)`);
    expect(promptOf("plainlead").blocks).toEqual([link]);
    expect(promptOf("plainlead").text).toContain("[Image attached by the user: image/png, 70 bytes; attachment ");
    expect(promptOf("plain").blocks).toEqual([link]);
    expect(promptOf("plain").text).toContain("[Image attached by the user: image/png, 70 bytes; attachment ");
    // fs/* in the additional directory: served to the worker that has it as a root, refused to the other.
    const fsOf = (agentId: string) =>
      log(agentId)
        .filter((e) => e.event === "action")
        .map((e) => [e.action, e.outcome]);
    expect(fsOf("rich")).toEqual([
      ["write", "ok"],
      ["read", "ok"],
    ]);
    expect(log("rich").find((e) => e.action === "read")?.content).toBe("shared notes");
    expect(readFileSync(join(extra, "rich.txt"), "utf8")).toBe("written by rich");
    expect(fsOf("plain")).toEqual([
      ["write", "refused"],
      ["read", "refused"],
    ]);
    expect(String(log("plain").find((e) => e.action === "write")?.error)).toContain("outside the workspace");
    expect(existsSync(join(extra, "plain.txt"))).toBe(false);

    // Stored with the product (a resumed run gives the agents the same), the bytes only in the attachment record.
    const db = new Database(statePath, { readonly: true });
    try {
      const events = (db.prepare("SELECT event FROM events").all() as { event: string }[]).map((e) => e.event);
      const created = events.map((e) => JSON.parse(e) as Record<string, unknown>).filter((e) => e.type === "created");
      expect(created.map((e) => e.additionalDirectories)).toEqual([[extra], [extra]]);
      expect(events.some((e) => e.includes(PNG) || e.includes(blob))).toBe(false);
      const records = db.prepare("SELECT kind, value FROM records").all() as { kind: string; value: string }[];
      expect(records.filter((r) => r.value.includes(PNG)).map((r) => r.kind)).toEqual(["attachment", "attachment"]);
    } finally {
      db.close();
    }
  }, 120_000);
});
