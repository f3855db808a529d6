/**
 * The dashboard's HTTP surface (issue 15) on a store written by a real run: read-only (anything but GET/HEAD is 405),
 * loopback host names only while bound to 127.0.0.1 (403 otherwise: no DNS rebinding), an unknown product is 404
 * with one sentence, a task's full output as text/plain, the event stream's first `view` is the current state, and
 * a taken port is a usage error naming --port.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli-run.js";
import { CLI, tempDir } from "../support/server-process.js";

function get(
  url: string,
  options: { method?: string; host?: string } = {},
): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? "GET", headers: options.host ? { host: options.host } : {} },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"] ?? ""), body }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
});

function startUi(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [CLI, "ui", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /dashboard: (http:\/\/\S+)/.exec(out);
      // The printed address carries the buttons' key (?key=…): the routes are under its origin.
      if (m) resolve({ url: `${new URL(m[1] as string).origin}/`, child });
    });
    child.once("exit", (code) => reject(new Error(`ui exited ${String(code)}`)));
  });
}

describe("dashboard HTTP", () => {
  it("is read-only, loopback-only, says what is missing, serves full output and streams the current view", async () => {
    const dir = tempDir("acp-orch-ui-http-");
    const state = join(dir, "state.db");
    const run = await runCli(["run", "--state", state, "--yes", "--goal", "- Write a README"], dir);
    expect(run.code, run.stderr).toBe(0);
    const id = /^product (prd_\w+)$/m.exec(run.stdout)?.[1] ?? "";
    const { url } = await startUi(["--state", state, "--port", "0"]);

    expect((await get(`${url}api/overview`, { method: "POST" })).status).toBe(405);
    const foreign = await get(`${url}api/overview`, { host: "attacker.example:80" });
    expect(foreign.status).toBe(403);
    expect(await get(`${url}api/overview`, { host: "localhost" })).toMatchObject({ status: 200 });
    expect(await get(`${url}api/overview`, { host: "127.0.0.2:80" })).toMatchObject({ status: 200 });
    // Names that merely start with "127." can be rebound to loopback by an attacker's DNS: refused.
    for (const rebound of ["127.attacker.example:80", "127.0.0.1.nip.io"]) {
      expect((await get(`${url}api/overview`, { host: rebound })).status).toBe(403);
    }
    const malformed = await get(`${url}api/products/%E0%A4%A`);
    expect(malformed.status).toBe(404);
    expect(JSON.parse(malformed.body)).toEqual({ error: expect.stringContaining("malformed") });

    const missing = await get(`${url}api/products/prd_nope`);
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body)).toEqual({ error: expect.stringContaining("prd_nope") });

    const product = JSON.parse((await get(`${url}api/products/${id}`)).body) as {
      tasks: { taskId: string; outputLength: number }[];
    };
    const output = await get(`${url}api/products/${id}/tasks/t1/output`);
    expect(output.status).toBe(200);
    expect(output.type).toMatch(/^text\/plain/);
    expect(output.body.length).toBe(product.tasks[0]?.outputLength);
    expect((await get(`${url}api/products/${id}/tasks/t9/output`)).status).toBe(404);

    const page = await get(url);
    expect(page.type).toMatch(/^text\/html/);
    expect(page.body).toContain('<script src="/app.js"></script>');

    const first = await new Promise<string>((resolve, reject) => {
      const req = request(`${url}api/stream?path=${encodeURIComponent("/api/overview")}`, (res) => {
        let text = "";
        res.on("data", (d: Buffer) => {
          text += d.toString();
          if (text.includes("\n\n")) {
            resolve(text);
            req.destroy();
          }
        });
      });
      req.on("error", reject);
      req.end();
    });
    expect(first).toMatch(/^event: view\ndata: \{/);
    expect(first).toContain(id);
  }, 120_000);

  it("a taken port is a usage error naming --port", async () => {
    const dir = tempDir("acp-orch-ui-http-");
    const state = join(dir, "state.db");
    expect((await runCli(["run", "--state", state, "--yes", "--goal", "- Write a README"], dir)).code).toBe(0);
    const { url } = await startUi(["--state", state, "--port", "0"]);
    const port = new URL(url).port;
    const second = await runCli(["ui", "--state", state, "--port", port], dir);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`The port ${port} is in use: pass another with --port (0 picks a free one).`);
  }, 120_000);
});
