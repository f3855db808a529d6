/**
 * `acp-orchestrator version` (also `--version`, `-v`): prints the package version.
 *
 * Owns reading the version from package.json; never writes anything but the version line to stdout.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expectPositionals, parseCommandArgs } from "./args.js";
import type { Command } from "./command.js";

/** The package version, read from package.json next to dist/ or the sources ("0.0.0" when none is found). */
export function packageVersion(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of [
    ["..", ".."],
    ["..", "..", ".."],
  ]) {
    try {
      const pkg = JSON.parse(readFileSync(join(here, ...up, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "acp-orchestrator" && pkg.version) return pkg.version;
    } catch {
      // try the next location
    }
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
