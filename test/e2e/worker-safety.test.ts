/**
 * What worker agents ask of their client is answered safely (issue 3, items 3-5), over real stdio: the built server
 * runs real worker subprocesses (test/fixtures/agents/fs-agent.ts on the official SDK).
 *
 * - fs: reads and writes are served inside the task's workspace only; `/etc/passwd`, `../outside`, `<cwd>/../x` and a
 *   symlink leaving the workspace are refused with JSON-RPC errors and nothing is written; fs is advertised, terminal
 *   is not.
 * - permissions: a worker's question is forwarded to the IDE when its product belongs to an ACP session (the title
 *   names the task); headless, the config's per-kind rules decide.
 * - usage: reported usage makes `status.budget.tokenSource` "reported", none "estimated", both "mixed".
 * - hygiene (one process per task attempt): a crash, a hang past `taskTimeoutMs`, a cancel and a server exit (stdin
 *   closed) each leave no worker process behind.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixturesDir, isAlive, sleep, tsxLoader } from "../fixtures/agents/pool-helpers.js";
import { startServer, tempDir, type Notification, type ServerHandle } from "../support/server-process.js";

interface Status {
  phase: string;
  tasks: { taskId: string; status: string; output?: string; error?: string }[];
  budget: { usedTokens: number; inputTokens: number; outputTokens: number; tokenSource?: string };
}

const confirm = { outcome: { outcome: "selected", optionId: "confirm" } };

function fsAgent(agentId: string, mode: string) {
  return { agentId, command: process.execPath, args: ["--import", tsxLoader, join(fixturesDir, "fs-agent.ts"), mode] };
}

function writeConfig(config: Record<string, unknown>): string {
  const file = join(tempDir("worker-safety-config-"), "acp-orchestrator.json");
  writeFileSync(file, JSON.stringify(config));
  return file;
}

function pids(workspace: string): number[] {
  const file = join(workspace, ".fs-agent.pids");
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : [];
}

async function waitForPids(workspace: string, count = 1): Promise<number[]> {
  for (let i = 0; i < 800 && pids(workspace).length < count; i++) await sleep(25);
  return pids(workspace);
}

/**
 * Live fs-agent processes working in `workspace`, found through /proc (cwd + command line), so a worker killed before
 * it could log its pid is still seen. Without /proc: the logged pids that are alive.
 */
function liveWorkers(workspace: string): number[] {
  if (!existsSync("/proc/self/cwd")) return pids(workspace).filter(isAlive);
  const found = new Set(pids(workspace).filter(isAlive));
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) !== workspace) continue;
      if (!readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("fs-agent.ts")) continue;
      if (isAlive(Number(entry))) found.add(Number(entry));
    } catch {
      // gone, or not ours
    }
  }
  return [...found];
}

/**
 * Plans with `product.plan` (no session: headless) and confirms; with `firstTaskOnly` the confirmed plan keeps only
 * the leader's first task (fewer worker processes). Resolves with the productId.
 */
async function runHeadless(
  server: ServerHandle,
  goal: string,
  cwd: string,
  allowedAgents: string[],
  firstTaskOnly = false,
): Promise<string> {
  const { productId } = await server.request<{ productId: string }>("product.plan", { goal, cwd, allowedAgents });
  const ready = await server.waitFor((n) => n.method === "product.planReady" && n.params.productId === productId);
  const tasks = (ready.params.plan as { tasks: { dependsOn: string[] }[] }).tasks;
  await server.request("product.confirm", { productId, ...(firstTaskOnly ? { tasks: tasks.slice(0, 1) } : {}) });
  return productId;
}

function completedOf(server: ServerHandle, productId: string): Promise<Notification> {
  return server.waitFor((n) => n.method === "product.completed" && n.params.productId === productId, 30_000);
}

describe.concurrent("worker requests over stdio", { timeout: 120_000 }, () => {
  it("serves fs only inside the workspace and refuses /etc/passwd, ../outside and symlink escapes; usage sets tokenSource", async () => {
    const base = tempDir("worker-safety-fs-");
    const workspace = join(base, "ws");
    mkdirSync(workspace);
    writeFileSync(join(base, "outside.txt"), "do not touch\n");
    const away = join(base, "away");
    mkdirSync(away);
    writeFileSync(join(away, "secret.txt"), "secret outside\n");
    symlinkSync(away, join(workspace, "link"));
    const usageOnly = tempDir("worker-safety-usage-");
    const mixedWs = tempDir("worker-safety-mixed-");
    const config = writeConfig({ agents: [fsAgent("probe", "probe"), fsAgent("usage", "usage")] });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });

    const probe = await runHeadless(server, "Probe the workspace, then summarise", workspace, [
      "probe",
      "builtin-worker",
    ]);
    const reported = await runHeadless(server, "Count the tokens, then count them again", usageOnly, ["usage"], true);
    const mixed = await runHeadless(server, "Count the tokens, then write a note", mixedWs, [
      "usage",
      "builtin-worker",
    ]);
    const done = await Promise.all([probe, reported, mixed].map((id) => completedOf(server, id)));
    expect(done.map((n) => n.params.phase)).toEqual(["completed", "completed", "completed"]);

    const status = await server.request<Status>("product.status", { productId: probe });
    const output = status.tasks.find((t) => t.taskId === "t1")?.output ?? "";
    const line = (prefix: string): string =>
      output.split("\n").find((l) => l.startsWith(prefix)) ?? `(no line ${prefix})`;
    expect(line("capabilities:")).toBe("capabilities: read=true write=true terminal=false");
    expect(line("read /etc/passwd ->")).toMatch(/-> error -32602: .*outside the workspace/);
    expect(line(`read ${workspace}/../outside.txt ->`)).toMatch(/-> error -32602: .*outside the workspace/);
    expect(line(`read ${join(workspace, "link", "secret.txt")} ->`)).toMatch(/-> error -32602: .*symlink/);
    expect(line("write ../outside.txt ->")).toMatch(/-> error -32602: .*must be absolute/);
    expect(line(`write ${workspace}/../outside.txt ->`)).toMatch(/-> error -32602: .*outside the workspace/);
    expect(line(`write ${join(workspace, "link", "pwned.txt")} ->`)).toMatch(/-> error -32602: .*symlink/);
    expect(line(`write ${join(workspace, "inside", "ok.txt")} ->`)).toBe(
      `write ${join(workspace, "inside", "ok.txt")} -> ok`,
    );
    expect(line(`read ${join(workspace, "inside", "ok.txt")} ->`)).toBe(
      `read ${join(workspace, "inside", "ok.txt")} -> ok: "line two\\n"`,
    );
    expect(output).not.toContain("root:");
    expect(output).not.toContain("secret outside");
    // Nothing was written outside the workspace; the allowed write is there.
    expect(readFileSync(join(base, "outside.txt"), "utf8")).toBe("do not touch\n");
    expect(existsSync(join(away, "pwned.txt"))).toBe(false);
    expect(
      existsSync(join(base, "..", "outside.txt")) && readFileSync(join(base, "..", "outside.txt"), "utf8") === "pwned",
    ).toBe(false);
    expect(readFileSync(join(workspace, "inside", "ok.txt"), "utf8")).toBe("line one\nline two\nline three\n");

    // Usage: reported by the agent (usage_update growth, then the response's _meta totals) vs the 4-chars estimate.
    const r = await server.request<Status>("product.status", { productId: reported });
    expect(r.budget).toMatchObject({
      inputTokens: 1_000,
      outputTokens: 250,
      usedTokens: 1_250,
      tokenSource: "reported",
    });
    const m = await server.request<Status>("product.status", { productId: mixed });
    expect(m.budget.tokenSource).toBe("mixed");
    expect(m.budget.usedTokens).toBeGreaterThan(1_250);
    // Neither the probe nor the built-in worker reports usage.
    expect(status.budget.tokenSource).toBe("estimated");
    expect(status.budget.usedTokens).toBeGreaterThan(0);
    expect(await server.close()).toBe(0);
    expect([workspace, usageOnly, mixedWs].flatMap(liveWorkers)).toEqual([]);
  });

  it("forwards a session's worker permission questions to the IDE, and applies per-kind rules headless", async () => {
    const workspace = tempDir("worker-safety-perm-");
    const headless = tempDir("worker-safety-headless-");
    const config = writeConfig({
      agents: [fsAgent("perm", "permission")],
      // The session's plan puts "summarise" on the built-in worker, so only the first task asks (issue 28: opt-in).
      builtinWorker: true,
      permissions: { default: "deny", rules: { read: "allow" } },
    });
    const forwarded: Record<string, unknown>[] = [];
    const server = await startServer({
      cwd: workspace,
      args: ["--config", config],
      onPermission: (params) => {
        const toolCall = params.toolCall as { toolCallId: string };
        if (toolCall.toolCallId.startsWith("plan-")) return confirm;
        forwarded.push(params);
        // The IDE answers the opposite of the headless policy: reject read, allow edit and execute.
        const options = params.options as { optionId: string; kind: string }[];
        const want = toolCall.toolCallId.endsWith("call-read") ? "reject_once" : "allow_once";
        return { outcome: { outcome: "selected", optionId: options.find((o) => o.kind === want)!.optionId } };
      },
    });
    const { sessionId } = await server.request<{ sessionId: string }>("session/new", {
      cwd: workspace,
      mcpServers: [],
    });
    const headlessId = await runHeadless(server, "Check the permissions, then summarise", headless, ["perm"], true);
    const answer = await server.request<{ stopReason: string }>("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: "Check the permissions, then summarise" }],
    });
    expect(answer).toEqual({ stopReason: "end_turn" });
    await completedOf(server, headlessId);

    // Forwarded: three questions, each naming the task, with the worker's own options.
    expect(forwarded).toHaveLength(3);
    for (const [i, kind] of ["read", "edit", "execute"].entries()) {
      const params = forwarded[i]!;
      expect(params.sessionId).toBe(sessionId);
      expect(params.toolCall).toMatchObject({
        toolCallId: expect.stringMatching(new RegExp(`^prd_[^/]+/t1/call-${kind}$`)),
        title: `Task t1 "Check the permissions": Do a ${kind} thing`,
        kind,
      });
      expect((params.options as { optionId: string }[]).map((o) => o.optionId)).toEqual([
        `allow-${kind}`,
        `reject-${kind}`,
      ]);
    }
    const t1 = server.notifications
      .filter((n) => n.method === "session/update" && n.params.sessionId === sessionId)
      .map(
        (n) => n.params.update as { toolCallId?: string; status?: string; content?: { content: { text: string } }[] },
      )
      .filter((u) => /^prd_[^/]+\/t1$/.test(u.toolCallId ?? "") && u.status === "completed")
      .at(-1);
    const ideText = t1?.content?.[0]?.content.text ?? "";
    expect(ideText).toContain("permission read: reject-read");
    expect(ideText).toContain("permission edit: allow-edit");
    expect(ideText).toContain("permission execute: allow-execute");

    // Headless (no session): the policy decides by tool kind; the turn that ended after its refusals failed the task,
    // naming the refused actions and the policy (issue 11), with the allowed read not among them.
    const failure = server.notifications.find(
      (n) =>
        n.method === "product.taskStatus" &&
        n.params.productId === headlessId &&
        n.params.taskId === "t1" &&
        n.params.status === "failed",
    );
    const error = String(failure?.params.error ?? "(no failure of t1)");
    expect(error).toMatch(
      /^The permission policy \{.*\} refused edit "Do a edit thing", execute "Do a execute thing" to agent "perm"/,
    );
    expect(error).not.toContain("Do a read thing");
    expect(await server.close()).toBe(0);
  });

  it("four FIFO requests from a worker (read and write each) are refused at once: every request answers in under a second", async () => {
    const workspace = tempDir("worker-safety-fifo-");
    const server = await startServer({
      cwd: workspace,
      args: ["--config", writeConfig({ agents: [fsAgent("fifo", "fifo")] })],
    });
    const productId = await runHeadless(server, "Read the pipes", workspace, ["fifo"], true);
    expect((await completedOf(server, productId)).params.phase).toBe("completed");
    const status = await server.request<Status>("product.status", { productId });
    const lines = (status.tasks[0]?.output ?? "").split("\n").filter((l) => l.startsWith("fifo "));
    // Eight requests on four FIFOs: before the fix each blocked a thread-pool thread for good (four = all of them).
    expect(lines.slice(0, 8).map((l) => l.replace(/ in \d+ ms$/, ""))).toEqual(
      ["pipe-1", "pipe-2", "pipe-3", "pipe-4"].flatMap((name) => [
        expect.stringMatching(new RegExp(`^fifo read ${name} -> error -32602: .*is not a regular file`)),
        expect.stringMatching(new RegExp(`^fifo write ${name} -> error -32602: .*is not a regular file`)),
      ]),
    );
    expect(lines[8]).toMatch(/^fifo read regular\.txt -> ok in \d+ ms$/);
    const times = lines.map((l) => Number(/ in (\d+) ms$/.exec(l)?.[1]));
    process.stderr.write(
      `[worker-safety] FIFO requests answered in ${times.join(", ")} ms (slowest ${Math.max(...times)} ms)\n`,
    );
    expect(times).toHaveLength(9);
    for (const ms of times) expect(ms).toBeLessThan(1_000);
    // The server still answers requests that touch its own files.
    expect((await server.request<Status>("product.status", { productId })).phase).toBe("completed");
    expect(await server.close()).toBe(0);
  });

  it("counts the usage field of the session/prompt response exactly (the SDK keeps it)", async () => {
    const workspace = tempDir("worker-safety-usage-response-");
    const config = writeConfig({ agents: [fsAgent("usage-response", "usage-response")] });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const productId = await runHeadless(server, "Count the tokens", workspace, ["usage-response"], true);
    expect((await completedOf(server, productId)).params.phase).toBe("completed");
    const status = await server.request<Status>("product.status", { productId });
    expect(status.budget).toMatchObject({
      inputTokens: 1_234,
      outputTokens: 56,
      usedTokens: 1_290,
      tokenSource: "reported",
    });
    expect(await server.close()).toBe(0);
  });

  it("leaves no worker process behind after a crash, a cancel, or a server exit", async () => {
    const crashWs = tempDir("worker-safety-crash-");
    const cancelWs = tempDir("worker-safety-cancel-");
    const exitWs = tempDir("worker-safety-exit-");
    const config = writeConfig({ agents: [fsAgent("hang", "hang"), fsAgent("crash", "crash")] });
    const server = await startServer({ cwd: exitWs, args: ["--config", config] });

    const crash = await runHeadless(server, "Crash now, then recover", crashWs, ["crash"], true);
    const cancelled = await runHeadless(server, "Wait forever, then stop", cancelWs, ["hang"], true);
    const exiting = await runHeadless(server, "Wait forever, then stop", exitWs, ["hang"], true);

    // Crash: the attempt fails with the exit code, and its process is gone.
    const failed = await server.waitFor(
      (n) => n.method === "product.taskStatus" && n.params.productId === crash && typeof n.params.error === "string",
    );
    expect(String(failed.params.error)).toContain("crashed (exit code 3)");
    const crashed = pids(crashWs);
    expect(crashed.length).toBeGreaterThanOrEqual(1);
    expect(isAlive(crashed[0]!)).toBe(false);
    await server.request("product.cancel", { productId: crash });
    expect(liveWorkers(crashWs)).toEqual([]);

    // Cancel: product.cancel answers once the worker has exited.
    const [hanging] = await waitForPids(cancelWs);
    await server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.productId === cancelled);
    expect(isAlive(hanging!)).toBe(true);
    expect(await server.request("product.cancel", { productId: cancelled })).toEqual({
      productId: cancelled,
      phase: "cancelled",
    });
    expect(isAlive(hanging!)).toBe(false);

    // Server exit: stdin closes while a worker is mid-turn; the server stops it and exits 0.
    const [running] = await waitForPids(exitWs);
    await server.waitFor((n) => n.method === "product.taskOutputDelta" && n.params.productId === exiting);
    expect(isAlive(running!)).toBe(true);
    expect(await server.close()).toBe(0);
    expect(isAlive(running!)).toBe(false);
    expect([crashWs, cancelWs, exitWs].flatMap(liveWorkers)).toEqual([]);
  });

  it("stops a worker that hangs past taskTimeoutMs and leaves no process behind", async () => {
    const workspace = tempDir("worker-safety-timeout-");
    const config = writeConfig({ agents: [fsAgent("hang", "hang")], taskTimeoutMs: 3_000 });
    const server = await startServer({ cwd: workspace, args: ["--config", config] });
    const productId = await runHeadless(server, "Wait forever, then stop", workspace, ["hang"], true);
    const timedOut = await server.waitFor(
      (n) =>
        n.method === "product.taskStatus" && n.params.productId === productId && typeof n.params.error === "string",
    );
    expect(String(timedOut.params.error)).toContain("timed out after 3000 ms");
    expect(timedOut.params.attempt).toBe(1);
    // The timed-out attempt's process is gone before its failure is reported (the retry may have started since).
    const [first] = pids(workspace);
    if (first !== undefined) expect(isAlive(first)).toBe(false);
    // Stop the retry, then nothing of this product may be left running.
    await server.request("product.cancel", { productId }).catch(() => undefined);
    expect(liveWorkers(workspace)).toEqual([]);
    expect(await server.close()).toBe(0);
    expect(liveWorkers(workspace)).toEqual([]);
  });
});
