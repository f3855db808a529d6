/**
 * The agent watchdog (DESIGN.md "Processes", guarantee 12): a tiny node program, run as `node -e WATCHDOG_SCRIPT --
 * COMMAND ARGS…`, that stands between the server and one agent process (worker or leader).
 *
 * Owns: starting the agent in its own session and process group, with stdin/stdout/stderr inherited (the server's
 * pipes reach the agent directly, nothing is copied), and a control socket on fd 3 whose other end only the server
 * holds. It must never outlive the agent, and the agent (and everything the agent started) must never outlive it:
 * - when the control socket closes (the server exited or died, by any signal, kill -9 included), it SIGKILLs the
 *   agent's process group and every process carrying its tag, then exits;
 * - when the agent exits on its own (or was signalled by the server), it SIGKILLs whatever the agent left behind
 *   (helpers in its group, and helpers that moved to a group or session of their own but still carry the tag in their
 *   environment), then exits with the agent's own status (code, or the same signal);
 * - SIGTERM/SIGINT/SIGHUP to the watchdog itself do the same as a closed control socket.
 *
 * Control messages (one JSON object per line, watchdog → server): `{"pid": N}` once the agent runs (N is also its
 * process group id); `{"spawnError": {"code", "message"}}` when it could not be started (then exit code 127);
 * `{"exit": {"code", "signal"}}` just before the watchdog exits after the agent did. The server never writes.
 *
 * The tag is the environment variable `ACP_ORCHESTRATOR_AGENT_TAG` (unique per watchdog), inherited by everything the
 * agent starts unless a process clears its environment on purpose; it is found through `/proc/<pid>/environ` (Linux;
 * elsewhere the process group alone is used). This file holds the program as text so it needs no file on disk, no
 * loader and no build step to run; it uses only node built-ins.
 */

/** Name of the environment variable that tags an agent and everything it starts. */
export const AGENT_TAG_VARIABLE = "ACP_ORCHESTRATOR_AGENT_TAG";

/** The watchdog program (CommonJS, node built-ins only). Arguments: `-- COMMAND ARGS…`. */
export const WATCHDOG_SCRIPT = String.raw`
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const crypto = require("node:crypto");
const [command, ...args] = process.argv.slice(1);
const TAG = "${AGENT_TAG_VARIABLE}";
const tag = process.pid + "-" + crypto.randomBytes(8).toString("hex");
const control = new net.Socket({ fd: 3, readable: true, writable: true });
let agent;
let finished = false;
function send(message, then) {
  try { control.write(JSON.stringify(message) + "\n", then); } catch { if (then) then(); }
}
function tagged() {
  const found = [];
  let entries;
  try { entries = fs.readdirSync("/proc"); } catch { return found; }
  const needle = "\0" + TAG + "=" + tag + "\0";
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      if (("\0" + fs.readFileSync("/proc/" + entry + "/environ", "latin1")).includes(needle)) found.push(pid);
    } catch {}
  }
  return found;
}
function killAll() {
  if (agent !== undefined && agent.pid !== undefined) {
    try { process.kill(-agent.pid, "SIGKILL"); } catch {}
  }
  for (let round = 0; round < 5; round++) {
    const pids = tagged();
    if (pids.length === 0) break;
    for (const pid of pids) { try { process.kill(pid, "SIGKILL"); } catch {} }
  }
}
function abandon() {
  if (finished) return;
  finished = true;
  killAll();
  process.exit(137);
}
control.on("data", () => {});
control.on("end", abandon);
control.on("close", abandon);
control.on("error", abandon);
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, abandon);
function spawnFailed(error) {
  if (finished) return;
  finished = true;
  send({ spawnError: { code: String(error.code || "EINVAL"), message: String(error.message) } }, () => process.exit(127));
  setTimeout(() => process.exit(127), 2000).unref();
}
try {
  agent = spawn(command, args, {
    stdio: "inherit",
    detached: true,
    env: { ...process.env, [TAG]: tag },
  });
} catch (error) {
  spawnFailed(error);
}
if (agent !== undefined) {
agent.once("spawn", () => send({ pid: agent.pid }));
agent.once("error", (error) => {
  if (agent.pid === undefined) spawnFailed(error);
});
agent.once("exit", (code, signal) => {
  if (finished) return;
  finished = true;
  killAll();
  send({ exit: { code, signal } }, () => {
    if (signal !== null) {
      for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.removeAllListeners(s);
      try { process.kill(process.pid, signal); } catch {}
      setTimeout(() => process.exit(128), 1000);
    } else {
      process.exit(code === null ? 1 : code);
    }
  });
  setTimeout(() => process.exit(code === null ? 128 : code), 2000).unref();
});
}
`;
