/**
 * Checks that a workspace directory given by a client exists before anything is recorded for it: a product whose `cwd`
 * is missing would otherwise be accepted and then fail every task with a confusing spawn error. This is the only
 * place the server looks at the filesystem for a request; it never creates or changes anything.
 */
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import type { ResponseError } from "vscode-jsonrpc";
import { invalidParams } from "./wire-errors.js";

/**
 * Resolves when `cwd` is an existing directory; otherwise throws -32602 with the issue at `path` (default `["cwd"]`).
 */
export async function requireDirectory(cwd: string, path: (string | number)[] = ["cwd"]): Promise<void> {
  let problem: string | null = null;
  try {
    const info = await stat(cwd);
    if (!info.isDirectory()) problem = "must be a directory, but it is a file";
  } catch {
    problem = "must be an existing directory; it does not exist or cannot be read";
  }
  if (problem !== null) {
    const error: ResponseError<unknown> = invalidParams([{ path, message: problem }]);
    throw error;
  }
}

/** Most `additionalDirectories` a session may have (ACP `session-setup`: extra roots of the session's file system). */
export const MAX_ADDITIONAL_DIRECTORIES = 32;

/**
 * Checks ACP `additionalDirectories` (each already absolute by its schema): at most `MAX_ADDITIONAL_DIRECTORIES`,
 * each an existing directory; otherwise -32602 at `["additionalDirectories", i]`. Returns them normalised (resolved,
 * duplicates and `cwd` itself dropped, order kept).
 */
export async function requireDirectories(cwd: string, dirs: readonly string[] | null | undefined): Promise<string[]> {
  if (!dirs || dirs.length === 0) return [];
  if (dirs.length > MAX_ADDITIONAL_DIRECTORIES) {
    throw invalidParams([
      {
        path: ["additionalDirectories"],
        message: `has ${dirs.length} directories, at most ${MAX_ADDITIONAL_DIRECTORIES} are accepted`,
      },
    ]);
  }
  const seen = new Set([resolve(cwd)]);
  const out: string[] = [];
  for (const [i, dir] of dirs.entries()) {
    await requireDirectory(dir, ["additionalDirectories", i]);
    const full = resolve(dir);
    if (seen.has(full)) continue;
    seen.add(full);
    out.push(full);
  }
  return out;
}
