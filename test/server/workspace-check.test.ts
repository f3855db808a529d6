/**
 * requireDirectory: a missing or non-directory `cwd` is refused with -32602 whose message names the field once
 * ("Invalid params: cwd must be …", not "cwd cwd must …", a fresh user's finding on issue 15).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDirectory } from "../../src/server/workspace-check.js";
import { tempDir } from "../support/server-process.js";

describe("requireDirectory", () => {
  it("names cwd once for a missing folder and for a file", async () => {
    const dir = tempDir("acp-orch-cwd-");
    await expect(requireDirectory(dir)).resolves.toBeUndefined();
    await expect(requireDirectory(join(dir, "missing"))).rejects.toMatchObject({
      code: -32602,
      message: "Invalid params: cwd must be an existing directory; it does not exist or cannot be read.",
    });
    const file = join(dir, "file.txt");
    writeFileSync(file, "x");
    await expect(requireDirectory(file)).rejects.toMatchObject({
      code: -32602,
      message: "Invalid params: cwd must be a directory, but it is a file.",
    });
  });
});
