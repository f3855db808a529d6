/**
 * The dashboard's browser scenario (issue 15, "Must show"), run on a given store (SQLite file or PostgreSQL URL) by
 * dashboard.test.ts and dashboard-postgres.test.ts: a real server plans and drives a product whose tasks are scripted
 * worker agents that each wait for a gate file; `acp-orchestrator ui` serves the same store from another process; the
 * distribution's Chromium (playwright-core) shows the product list, then the product's DAG while the test opens the
 * gates one group at a time. At each step a screenshot is decoded and every node box's dominant colour must be its
 * status colour (the node count and the statuses checked on pixels, not only on the DOM), the selected task's output
 * is shown, the page is never reloaded, and the browser logs no console error.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { Browser, Page } from "playwright-core";
import { statusStyle } from "../../src/operator/format.js";
import { dominantColours, launchChromium } from "../support/browser.js";
import { CLI, startServer, tempDir, type ServerHandle } from "../support/server-process.js";
import { SCRIPTED_AGENT_ARGS } from "../support/scripted-agent-program.js";

interface PlanTask {
  taskId: string;
  title: string;
  dependsOn: string[];
}

/** The `ui` command as a subprocess; resolves once it printed its address. */
async function startUi(state: string): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const child = spawn(process.execPath, [CLI, "ui", "--state", state, "--port", "0", "--poll-ms", "200"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
      const m = /dashboard: (http:\/\/\S+)/.exec(stdout);
      if (m) resolve(m[1] as string);
    });
    child.once("exit", (code) => reject(new Error(`ui exited with ${String(code)} before listening: ${stderr}`)));
  });
  return { url, child, stderr: () => stderr };
}

type DrawnNode = { taskId: string; status: string; box: { x: number; y: number; width: number; height: number } };

/** Every node's id, status and box, read in one go (the page redraws on every view the stream delivers). */
const DRAWN_NODES = `[...document.querySelectorAll("svg#dag g.node")].map((g) => {
  const r = g.querySelector("rect").getBoundingClientRect();
  return { taskId: g.getAttribute("data-task-id"), status: g.getAttribute("data-status"), box: { x: r.x, y: r.y, width: r.width, height: r.height } };
})`;

/** Every node's status as drawn (DOM), and its dominant colour in a screenshot taken meanwhile (pixels). */
async function nodesOnScreen(page: Page, shot: string): Promise<{ taskId: string; status: string; colour: string }[]> {
  await page.evaluate("window.scrollTo(0, 0)");
  for (;;) {
    const before = (await page.evaluate(DRAWN_NODES)) as DrawnNode[];
    const png = await page.screenshot({ path: shot, fullPage: true });
    const after = (await page.evaluate(DRAWN_NODES)) as DrawnNode[];
    // A status change between the two reads: the screenshot may show either; take another.
    if (JSON.stringify(before) !== JSON.stringify(after)) continue;
    const colours = await dominantColours(
      page,
      png,
      before.map((f) => f.box),
    );
    return before.map((f, i) => ({ taskId: f.taskId, status: f.status, colour: colours[i] ?? "" }));
  }
}

/** Waits until the page's DAG shows `want` (taskId → status), then checks the screenshot agrees with it. */
async function expectDag(page: Page, want: Map<string, string>, shot: string): Promise<void> {
  const wanted = [...want].map(([id, status]) => `svg#dag g.node[data-task-id="${id}"][data-status="${status}"]`);
  await page.waitForFunction(
    `(${JSON.stringify(wanted)}).every((s) => document.querySelector(s)) && document.querySelectorAll("svg#dag g.node").length === ${want.size}`,
    undefined,
    { timeout: 60_000, polling: 100 },
  );
  const seen = await nodesOnScreen(page, shot);
  expect(seen.length).toBe(want.size);
  for (const n of seen) {
    expect(n.status, n.taskId).toBe(want.get(n.taskId));
    expect(n.colour, `${n.taskId} (${n.status}) in ${shot}`).toBe(statusStyle(n.status).fill);
  }
}

/** Clicks the node of `taskId` and waits until its detail panel shows every one of `lines` in the output. */
async function showsOutput(page: Page, taskId: string, lines: string[]): Promise<void> {
  await page.locator(`svg#dag g.node[data-task-id="${taskId}"]`).click();
  await page.waitForSelector(`#task-detail[data-task-id="${taskId}"]`);
  await page.waitForFunction(
    `(${JSON.stringify(lines)}).every((l) => document.querySelector("#task-output").textContent.includes(l))`,
    undefined,
    { timeout: 30_000 },
  );
}

export async function dashboardScenario(state: string): Promise<void> {
  const dir = tempDir("acp-orch-ui-");
  const workspace = join(dir, "ws");
  mkdirSync(workspace);
  const gates = join(dir, "gates");
  mkdirSync(gates);
  const scriptFile = join(dir, "script.json");
  const tasks: Record<string, unknown> = {};
  for (let i = 1; i <= 8; i++) {
    const id = `t${i}`;
    tasks[id] = {
      actions: [{ say: `${id}: started\n` }, { waitForFile: join(gates, id) }, { say: `${id}: gate open\n` }],
      text: `${id} finished`,
    };
  }
  writeFileSync(scriptFile, JSON.stringify({ worker: { tasks } }));
  const configFile = join(dir, "acp-orchestrator.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      agents: [
        {
          agentId: "gated",
          role: "worker",
          command: process.execPath,
          args: [...SCRIPTED_AGENT_ARGS],
          env: { SCRIPTED_AGENT_SCRIPT: scriptFile },
        },
      ],
    }),
  );
  const open = (ids: string[]) => ids.forEach((id) => writeFileSync(join(gates, id), ""));

  let server: ServerHandle | undefined;
  let ui: Awaited<ReturnType<typeof startUi>> | undefined;
  let browser: Browser | undefined;
  try {
    server = await startServer({
      statePath: state,
      cwd: workspace,
      args: ["--config", configFile, "--log-level", "warn"],
    });
    const ready = server.waitFor((n) => n.method === "product.planReady", 60_000);
    const { productId } = await server.request<{ productId: string }>("product.plan", {
      goal: "- Write the parser\n- Write the tests\n- Then write the docs based on the parser",
      cwd: workspace,
      allowedAgents: ["gated"],
    });
    const plan = (await ready).params.plan as { tasks: PlanTask[] };
    const ids = plan.tasks.map((t) => t.taskId);
    const roots = plan.tasks.filter((t) => t.dependsOn.length === 0).map((t) => t.taskId);
    expect(roots.length).toBeGreaterThan(0);
    expect(roots.length).toBeLessThan(ids.length);

    ui = await startUi(state);
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 });
    const consoleErrors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    page.on("pageerror", (e) => consoleErrors.push(e.message));

    // The product list, while the plan waits for confirmation.
    await page.goto(ui.url);
    const row = page.locator(`tr[data-product-id="${productId}"]`);
    await row.waitFor({ timeout: 30_000 });
    expect(await row.getAttribute("data-phase")).toBe("awaiting_confirmation");
    await page.waitForSelector("#stream-state.live");
    await row.click();
    await page.waitForSelector("#product-name");
    await page.evaluate("window.notReloaded = true");

    // The proposed plan is drawn before confirmation, every node pending.
    await expectDag(page, new Map(ids.map((id) => [id, "pending"])), join(dir, "1-proposed.png"));

    // Confirmed: the roots run (each waits at its gate), the rest wait.
    await server.request("product.confirm", { productId });
    await expectDag(
      page,
      new Map(ids.map((id) => [id, roots.includes(id) ? "running" : "pending"])),
      join(dir, "2-roots-running.png"),
    );
    // A running task's output is shown live while it runs (the owner persists it in bounded chunks, issue 29).
    await showsOutput(page, roots[0] as string, [`${roots[0]}: started`]);
    expect(await page.getAttribute("#task-output", "data-live")).toBe("true");

    // The roots finish: their nodes turn green, their dependents start.
    open(roots);
    const next = plan.tasks
      .filter((t) => !roots.includes(t.taskId) && t.dependsOn.every((d) => roots.includes(d)))
      .map((t) => t.taskId);
    const after = new Map(
      ids.map((id) => [id, roots.includes(id) ? "completed" : next.includes(id) ? "running" : "pending"]),
    );
    await expectDag(page, after, join(dir, "3-roots-done.png"));
    await showsOutput(page, roots[0] as string, [
      `${roots[0]}: started`,
      `${roots[0]}: gate open`,
      `${roots[0]} finished`,
    ]);

    // Everything finishes.
    open(ids);
    await expectDag(page, new Map(ids.map((id) => [id, "completed"])), join(dir, "4-completed.png"));

    // A task's output, by clicking its node.
    const last = ids[ids.length - 1] as string;
    await showsOutput(page, last, [`${last}: started`, `${last}: gate open`, `${last} finished`]);

    // A link to a task the product does not have says so and selects no other task (issue 28, case 5).
    await page.evaluate(`location.hash = "#/product/${productId}/t22-unknown"`);
    await page.waitForSelector("#task-not-found", { timeout: 30_000 });
    expect(await page.textContent("#task-not-found")).toBe(`Task t22-unknown not found in product ${productId}.`);
    expect(await page.locator("g.node.selected").count()).toBe(0);
    expect(await page.getAttribute("#task-detail", "data-task-id")).toBe("");

    expect(await page.evaluate("window.notReloaded === true")).toBe(true);
    expect(consoleErrors).toEqual([]);
    const status = await server.request<{ phase: string }>("product.status", { productId });
    expect(["completed", "executing"]).toContain(status.phase);
  } finally {
    await browser?.close();
    if (ui && ui.child.exitCode === null) {
      const exited = new Promise<number | null>((resolve) => ui?.child.once("exit", (code) => resolve(code)));
      ui.child.kill("SIGTERM");
      expect(await exited, ui.stderr()).toBe(0);
    }
    if (server && server.child.exitCode === null) await server.close();
  }
}
