/**
 * Checks that a workspace directory given by a client exists before anything is recorded for it: a product whose `cwd`
 * is missing would otherwise be accepted and then fail every task with a confusing spawn error. This is the only
 * place the server looks at the filesystem for a request; it never creates or changes anything.
 */
import { stat } from "node:fs/promises";
import type { ResponseError } from "vscode-jsonrpc";
import { invalidParams } from "./wire-errors.js";

/** Resolves when `cwd` is an existing directory; otherwise throws -32602 with the issue at `cwd`. */
export async function requireDirectory(cwd: string): Promise<void> {
  let problem: string | null = null;
  try {
    const info = await stat(cwd);
    if (!info.isDirectory()) problem = "must be a directory, but it is a file";
  } catch {
    problem = "must be an existing directory; it does not exist or cannot be read";
  }
  if (problem !== null) {
    const error: ResponseError<unknown> = invalidParams([{ path: ["cwd"], message: problem }]);
    throw error;
  }
}
