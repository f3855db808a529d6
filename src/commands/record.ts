/**
 * `acp-orchestrator record` and `acp-orchestrator replay`: the transcript commands (protocol/TRANSCRIPTS.md), whose
 * own flags and the COMMAND after `--` are parsed by src/transcripts/commands.ts.
 *
 * Owns their registration in the CLI only.
 */
import { RECORD_USAGE, REPLAY_USAGE, runRecordCommand, runReplayCommand } from "../transcripts/commands.js";
import type { Command } from "./command.js";

export const recordCommand: Command = {
  name: "record",
  synopsis: "record --out FILE [--normalize] -- COMMAND...",
  summary: "proxy an ACP agent's stdio and write a transcript",
  help: RECORD_USAGE,
  run: runRecordCommand,
};

export const replayCommand: Command = {
  name: "replay",
  synopsis: "replay FILE... [--timeout MS] [--jobs N] [--keep] [-- COMMAND...]",
  summary: "replay transcripts against fresh servers",
  help: REPLAY_USAGE,
  run: runReplayCommand,
};
