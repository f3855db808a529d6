/**
 * The CLI's commands, in the order `acp-orchestrator help` lists them. Adding a command is one module exporting a
 * `Command` (command.ts) and one line here.
 */
import { checkAgentsCommand } from "./check-agents.js";
import { checkHostCommand } from "./check-host.js";
import { controlCommands } from "./control.js";
import { diffCommand, mergeCommand } from "./diff.js";
import { verifyCommand } from "./verify.js";
import type { Command } from "./command.js";
import { demoCommand } from "./demo.js";
import { eventsCommand } from "./events.js";
import { graphCommand } from "./graph.js";
import { listCommand } from "./list.js";
import { resumeCommand, runCommand } from "./run.js";
import { statusCommand } from "./status.js";
import { uiCommand } from "./ui.js";
import { helpCommand } from "./help.js";
import { recordCommand, replayCommand } from "./record.js";
import { serveCommand } from "./serve.js";
import { versionCommand } from "./version.js";

export const COMMANDS: readonly Command[] = [
  serveCommand,
  demoCommand,
  runCommand,
  resumeCommand,
  ...controlCommands,
  diffCommand,
  mergeCommand,
  verifyCommand,
  listCommand,
  statusCommand,
  eventsCommand,
  graphCommand,
  uiCommand,
  recordCommand,
  replayCommand,
  checkAgentsCommand,
  checkHostCommand,
  helpCommand(() => COMMANDS),
  versionCommand,
];
