/**
 * `acp-orchestrator version` (also `--version`, `-v`): prints the package version.
 *
 * Owns reading the version from package.json; never writes anything but the version line to stdout.
 */
import { readFileSync } from "node:fs";
import { packagePath } from "../package-files.js";
import { expectPositionals, parseCommandArgs } from "../cli-kit/args.js";
import type { Command } from "./command.js";

/**
 * The package version, read from the package root's package.json (src/package-files.ts: the same file bundled,
 * compiled or from sources); "0.0.0" when it cannot be read or is not this package's.
 */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(packagePath("package.json"), "utf8")) as { name?: string; version?: string };
    if (pkg.name === "acp-orchestrator" && pkg.version) return pkg.version;
  } catch {
    // no readable package.json at the root
  }
  return "0.0.0";
}

export const versionCommand: Command = {
  name: "version",
  synopsis: "version",
  summary: "print the version",
  help: "Usage: acp-orchestrator version\n\nPrints the version of acp-orchestrator (also --version, -v).\n",
  run(argv) {
    const { positionals } = parseCommandArgs("version", argv, {});
    expectPositionals("version", positionals, 0, 0, "no arguments");
    process.stdout.write(`${packageVersion()}\n`);
    return Promise.resolve(0);
  },
};
