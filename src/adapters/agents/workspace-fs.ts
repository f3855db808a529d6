/**
 * Worker file requests served inside one workspace (DESIGN.md, Agents: "Their file requests are served only inside the
 * task's workspace"; ACP `fs/read_text_file`, `fs/write_text_file`) and inside the product's additional directories
 * (issue 31, ACP session-setup: the session's root set is its cwd and its `additionalDirectories`), each root with the
 * same rules.
 *
 * Owns path resolution and containment (absolute paths only; `..` escapes, symlinks that leave the workspace and
 * dangling symlinks are refused; so is `.git` and anything under it, guarantee 16), line/limit slicing of reads, and the refusal errors (JSON-RPC code + one sentence +
 * `data`). It must never touch anything outside the workspace root, never write anything when it refuses, and never
 * follow a symlink in the last path component when opening (`O_NOFOLLOW`).
 *
 * Not a sandbox: a worker is a local process that could touch the disk directly. This guards the protocol surface, so
 * a worker that behaves (or is confined by other means) cannot be steered through us outside its workspace.
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";

/** JSON-RPC codes used for answers to worker file requests (ACP-V1.md section 5). */
export const FS_ERROR_CODES = {
  /** The request is refused (relative path, outside the workspace, symlink escape, not a file, too large). */
  refused: -32602,
  /** The file does not exist (ACP `resource_not_found`). */
  notFound: -32002,
  /** Any other I/O failure. */
  failed: -32603,
} as const;

/** Why a request was refused or failed; carried as `data.reason`. */
export type WorkspaceFsReason =
  | "invalid_path"
  | "relative_path"
  | "outside_workspace"
  | "symlink_escape"
  | "dangling_symlink"
  | "not_a_file"
  | "git_dir"
  | "too_large"
  | "not_found"
  | "io_error";

/** A refused or failed file request. `code` and `data` are what the JSON-RPC error answer carries. */
export class WorkspaceFsError extends Error {
  override readonly name = "WorkspaceFsError";
  constructor(
    readonly code: number,
    message: string,
    readonly data: { path: string; reason: WorkspaceFsReason; workspace: string },
  ) {
    super(message);
  }
}

/**
 * True when `rel` (a path relative to the workspace root) is `.git` or lies under a `.git` folder at any depth (any
 * letter case: case-insensitive file systems). Pure.
 */
export function touchesGitDir(rel: string): boolean {
  return rel.split(/[\\/]+/).some((part) => part.toLowerCase() === ".git");
}

/** Reads at most this many bytes (10 MiB) by default; bigger files are refused with `too_large`. */
export const DEFAULT_MAX_READ_BYTES = 10 * 1024 * 1024;

/** True when `child` is `parent` or lies under it (both absolute and normalised). Pure. */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === "" || (!isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`));
}

/** Lines `line` (1-based; 0 reads as 1) to `line + limit - 1` of `text`, line endings kept. Pure. */
export function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
  const lines = text.split(/(?<=\n)/);
  const start = Math.max(1, line ?? 1) - 1;
  const end = limit === undefined || limit === null ? lines.length : start + Math.max(0, limit);
  return lines.slice(start, end).join("");
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * The file-system view a worker gets: the workspace root and any additional roots, read and write of text files under
 * them.
 *
 * Resolution (`resolve`): the path must be an absolute string; it is normalised (`..` collapsed) and must lie
 * lexically under a root (or its realpath; the workspace is tried first, then the additional roots in order, and the
 * first that holds the path is its root: the rest of the checks are against that root alone); then the nearest
 * existing ancestor is realpath'ed and the real result must lie under that root's realpath (so a symlink inside it
 * that points outside, even into another root, is refused, and so is a dangling symlink, whose target could be
 * created outside). An additional root that is or lies in a `.git` folder serves nothing. Reads and writes then open the resolved real path with `O_NOFOLLOW`.
 * Remaining race: a directory swapped for a symlink between the check and the open is not detected.
 */
export class WorkspaceFs {
  private readonly rootReal = new Map<string, Promise<string>>();
  private readonly maxReadBytes: number;
  /** The workspace first, then the additional roots (issue 31): a path is served under the first that holds it. */
  readonly roots: readonly string[];
  /** Folders never served through an additional root (the user's checkout of an isolated attempt; guarantee 16). */
  private readonly protectedRoots: readonly string[];

  /**
   * `root` must be absolute (the task's workspace); so must each of `additionalRoots` (the product's additional
   * directories, ACP session-setup: further roots served with the same rules). Does not touch the disk until a
   * request comes. `protectedRoots` (absolute; e.g. the user's checkout when the workspace is its own worktree) are
   * never served through an additional root that overlaps them: an additional directory that contains the checkout,
   * lies inside it or aliases it by a symlink does not open it to the worker.
   */
  constructor(
    readonly root: string,
    options: { maxReadBytes?: number; additionalRoots?: readonly string[]; protectedRoots?: readonly string[] } = {},
  ) {
    for (const r of [root, ...(options.additionalRoots ?? [])]) {
      if (!isAbsolute(r)) throw new RangeError(`A workspace root must be an absolute path, got "${r}".`);
    }
    this.roots = [root, ...(options.additionalRoots ?? []).filter((r) => resolve(r) !== resolve(root))];
    this.maxReadBytes = options.maxReadBytes ?? DEFAULT_MAX_READ_BYTES;
    this.protectedRoots = (options.protectedRoots ?? []).filter((r) => isAbsolute(r));
  }

  private refuse(code: number, path: string, reason: WorkspaceFsReason, message: string): WorkspaceFsError {
    return new WorkspaceFsError(code, message, { path, reason, workspace: this.root });
  }

  /** "the workspace X" or, with additional roots, "the workspace X and the additional directories Y, Z". */
  private where(): string {
    const extra = this.roots.slice(1);
    return `the workspace ${this.root}${extra.length > 0 ? ` and the additional directories ${extra.join(", ")}` : ""}`;
  }

  private realRoot(root: string): Promise<string> {
    let real = this.rootReal.get(root);
    if (real === undefined) {
      real = realpath(root).catch((error: unknown) => {
        this.rootReal.delete(root);
        throw this.refuse(
          FS_ERROR_CODES.failed,
          root,
          "io_error",
          `The workspace root ${root} cannot be resolved (${errnoOf(error) ?? String(error)}).`,
        );
      });
      this.rootReal.set(root, real);
    }
    return real;
  }

  /**
   * The root that lexically holds `lexical` (the first, workspace first) with its realpath, or `undefined`. An
   * additional root whose real path is or lies under a `.git` folder is never served (guarantee 16).
   */
  private async rootOf(lexical: string): Promise<{ root: string; real: string } | undefined> {
    for (const [i, root] of this.roots.entries()) {
      // The workspace must resolve (else the request fails); an additional root that no longer does serves nothing.
      const real = i === 0 ? await this.realRoot(root) : await this.realRoot(root).catch(() => undefined);
      if (real === undefined || (i > 0 && touchesGitDir(real))) continue;
      if (isInside(resolve(root), lexical) || isInside(real, lexical)) return { root, real };
    }
    return undefined;
  }

  /**
   * Throws when the resolved `full` (`lexical` as asked) is git's (guarantee 16: `.git` and everything under it) or, by
   * an additional root, inside a protected root (the user's checkout of an isolated attempt). Reads the disk only.
   */
  private async refuseReserved(path: string, root: string, rootReal: string, full: string, lexical: string) {
    if (root !== this.root && (await this.isProtected(full, lexical))) {
      throw this.refuse(
        FS_ERROR_CODES.refused,
        path,
        "outside_workspace",
        `Refused "${path}": it is inside the user's checkout, which this task reaches only through its own worktree ${this.root} (isolation), not through an additional directory.`,
      );
    }
    if (touchesGitDir(relative(rootReal, full)) || touchesGitDir(relative(resolve(root), lexical))) {
      // Guarantee 16: a worktree is data, never configuration; git's own files are out of a worker's reach.
      throw this.refuse(
        FS_ERROR_CODES.refused,
        path,
        "git_dir",
        `Refused "${path}": .git and everything under it are git's, not the workspace's; workers may not read or write them.`,
      );
    }
  }

  /** True when `full` (real) or `lexical` lies in a protected root, by its path or by its real path. */
  private async isProtected(full: string, lexical: string): Promise<boolean> {
    for (const root of this.protectedRoots) {
      const real = await realpath(root).catch(() => resolve(root));
      if (isInside(real, full) || isInside(resolve(root), lexical) || isInside(resolve(root), full)) return true;
    }
    return false;
  }

  /**
   * Resolves `path` to the real absolute path it names inside the workspace, or throws `WorkspaceFsError`
   * (`refused`: invalid/relative path, outside the workspace, symlink escape, dangling symlink, `.git` or anything
   * under it, `data.reason` `git_dir`). The target itself need not exist. Reads the disk (lstat/realpath) but never
   * writes.
   */
  async resolve(path: string): Promise<string> {
    if (typeof path !== "string" || path === "" || path.includes("\0")) {
      throw this.refuse(
        FS_ERROR_CODES.refused,
        String(path),
        "invalid_path",
        "The path must be a non-empty string without NUL bytes.",
      );
    }
    if (!isAbsolute(path)) {
      throw this.refuse(
        FS_ERROR_CODES.refused,
        path,
        "relative_path",
        `Refused "${path}": file paths must be absolute (ACP), inside ${this.where()}.`,
      );
    }
    const lexical = resolve(path);
    const held = await this.rootOf(lexical);
    if (held === undefined) {
      throw this.refuse(
        FS_ERROR_CODES.refused,
        path,
        "outside_workspace",
        `Refused "${path}": it is outside ${this.where()}.`,
      );
    }
    const { root, real: rootReal } = held;
    // Walk up to the nearest entry that exists (lstat: a dangling symlink exists), then realpath it.
    let existing = lexical;
    const rest: string[] = [];
    for (;;) {
      try {
        await lstat(existing);
        break;
      } catch (error) {
        const code = errnoOf(error);
        if (code !== "ENOENT" && code !== "ENOTDIR") throw this.ioError(path, error);
        const parent = dirname(existing);
        if (parent === existing) break;
        rest.unshift(basename(existing));
        existing = parent;
      }
    }
    let real: string;
    try {
      real = await realpath(existing);
    } catch (error) {
      if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ELOOP") {
        throw this.refuse(
          FS_ERROR_CODES.refused,
          path,
          "dangling_symlink",
          `Refused "${path}": it goes through a symlink whose target does not exist.`,
        );
      }
      throw this.ioError(path, error);
    }
    const full = rest.length === 0 ? real : join(real, ...rest);
    if (!isInside(rootReal, full)) {
      throw this.refuse(
        FS_ERROR_CODES.refused,
        path,
        "symlink_escape",
        `Refused "${path}": it resolves through a symlink to ${full}, outside ${root === this.root ? `the workspace ${root}` : `the additional directory ${root}`}.`,
      );
    }
    await this.refuseReserved(path, root, rootReal, full, lexical);
    return full;
  }

  /**
   * `fs/read_text_file`: the UTF-8 text of a file inside the workspace, optionally from `line` (1-based) for `limit`
   * lines. Throws `WorkspaceFsError`: refused (see `resolve`; also not a regular file, or larger than the read limit),
   * `notFound`, or `failed`. Never writes.
   */
  async readTextFile(path: string, options: { line?: number | null; limit?: number | null } = {}): Promise<string> {
    const full = await this.resolve(path);
    await this.refuseSpecial(path, full);
    let handle;
    try {
      // O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer (issue 11).
      handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      if (errnoOf(error) === "ENOENT") {
        throw this.refuse(FS_ERROR_CODES.notFound, path, "not_found", `The file ${path} does not exist.`);
      }
      if (errnoOf(error) === "ELOOP") {
        throw this.refuse(FS_ERROR_CODES.refused, path, "symlink_escape", `Refused "${path}": it became a symlink.`);
      }
      throw this.ioError(path, error);
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) {
        throw this.refuse(FS_ERROR_CODES.refused, path, "not_a_file", `Refused "${path}": it is not a regular file.`);
      }
      if (info.size > this.maxReadBytes) {
        throw this.refuse(
          FS_ERROR_CODES.refused,
          path,
          "too_large",
          `Refused "${path}": it has ${info.size} bytes, more than the ${this.maxReadBytes}-byte read limit.`,
        );
      }
      const text = await handle.readFile({ encoding: "utf8" });
      return sliceLines(text, options.line, options.limit);
    } catch (error) {
      if (error instanceof WorkspaceFsError) throw error;
      throw this.ioError(path, error);
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  /**
   * `fs/write_text_file`: creates or replaces a file inside the workspace with `content` (UTF-8), creating missing
   * parent folders (inside the workspace). Throws `WorkspaceFsError` (refused, see `resolve`; or `failed`). Nothing
   * is created or written when the path is refused.
   */
  async writeTextFile(path: string, content: string): Promise<void> {
    const full = await this.resolve(path);
    if (typeof content !== "string") {
      throw this.refuse(FS_ERROR_CODES.refused, path, "invalid_path", "The content must be a string.");
    }
    await this.refuseSpecial(path, full);
    let handle;
    try {
      await mkdir(dirname(full), { recursive: true });
      // O_NONBLOCK: a FIFO swapped in after the check fails at once (ENXIO) instead of waiting for a reader.
      handle = await open(
        full,
        constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        0o644,
      );
    } catch (error) {
      if (errnoOf(error) === "ELOOP") {
        throw this.refuse(FS_ERROR_CODES.refused, path, "symlink_escape", `Refused "${path}": it became a symlink.`);
      }
      if (errnoOf(error) === "EISDIR") {
        throw this.refuse(FS_ERROR_CODES.refused, path, "not_a_file", `Refused "${path}": it is a directory.`);
      }
      if (errnoOf(error) === "ENXIO") throw this.notAFile(path);
      throw this.ioError(path, error);
    }
    try {
      if (!(await handle.stat()).isFile()) throw this.notAFile(path);
      await handle.writeFile(content, "utf8");
    } catch (error) {
      throw this.ioError(path, error);
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  /**
   * Refuses at once a path that exists and is not a regular file (a FIFO, a device, a socket, a directory): opening
   * one could block a thread-pool thread for good (issue 11). Reads only (`lstat`).
   */
  private async refuseSpecial(path: string, full: string): Promise<void> {
    let info;
    try {
      info = await lstat(full);
    } catch {
      return; // absent (a write creates it) or unreadable: the open says which
    }
    if (info.isSymbolicLink() || info.isFile()) return; // a symlink is refused by O_NOFOLLOW at open
    if (info.isDirectory()) {
      throw this.refuse(FS_ERROR_CODES.refused, path, "not_a_file", `Refused "${path}": it is a directory.`);
    }
    throw this.notAFile(path);
  }

  private notAFile(path: string): WorkspaceFsError {
    return this.refuse(
      FS_ERROR_CODES.refused,
      path,
      "not_a_file",
      `Refused "${path}": it is not a regular file (a FIFO, device or socket is never opened).`,
    );
  }

  private ioError(path: string, error: unknown): WorkspaceFsError {
    const code = errnoOf(error);
    return this.refuse(
      FS_ERROR_CODES.failed,
      path,
      "io_error",
      `Could not access ${path}${code ? ` (${code})` : ""}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
