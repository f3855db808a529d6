/**
 * The `workspace` of a remote-backed product (PROTOCOL.md section 5, "Code through a git remote"; docs/FLEET.md):
 * `{remote, baseRef?}`. The product's worktrees, attempt refs and integration branch live in a local mirror of
 * `remote` on whichever server drives it, and everything it integrates is pushed there.
 *
 * Credentials stay outside (issue 33): a URL that carries a secret (a password, or a user name on http(s), which is
 * how tokens are embedded) is refused, so a stored URL never holds one; git's credential helpers, an SSH agent or the
 * host's environment provide them. URLs git would read as an option (`-…`) or that run a command (`ext::`, `fd::`)
 * are refused too. Pure: no I/O.
 */
import * as z from "zod";
import { lazySchema } from "./lazy-schema.js";

/** Longest accepted remote URL (characters). */
export const REMOTE_URL_MAX = 2_000;

const SECRET_QUERY = /(?:^|[?&])[^=&]*(?:token|key|password|passwd|secret|auth|sig)[^=&]*=/i;

const hasControl = (text: string): boolean =>
  [...text].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);

/**
 * Why `url` may not be a product's remote, in one plain sentence, or `null` when it may: an absolute path, a
 * `file://`, `ssh://`, `git://`, `http(s)://` URL or an scp-like `user@host:path`, with no embedded credentials.
 */
export function remoteUrlProblem(url: string): string | null {
  if (url.trim() !== url || url.length === 0)
    return "The workspace remote must not be blank or start or end with spaces.";
  if (hasControl(url)) return "The workspace remote must not contain control characters.";
  if (url.startsWith("-")) return "The workspace remote must not start with '-'.";
  if (/^(?:ext|fd)::/i.test(url))
    return "The workspace remote may not use the ext:: or fd:: transports (they run commands).";
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    if (url.startsWith("/")) return null;
    // scp-like: [user@]host:path; a user name there is an SSH login, never a secret (no password syntax exists).
    if (/^[^/:@]+@?[^/:]*:[^/]/.test(url) && !/^[^@]*:[^@]*@/.test(url)) return null;
    return "The workspace remote must be an absolute path or a file://, ssh://, git:// or https:// URL.";
  }
  if (!["file", "ssh", "git", "http", "https"].includes(scheme))
    return `The workspace remote uses the unsupported scheme ${scheme}://; use file://, ssh://, git:// or https://.`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "The workspace remote is not a valid URL.";
  }
  const credentials =
    parsed.password !== "" ||
    ((scheme === "http" || scheme === "https") && parsed.username !== "") ||
    SECRET_QUERY.test(parsed.search);
  if (credentials)
    return "The workspace remote must not carry credentials (user:password@, a token in the URL or its query); let git's credential helper, an SSH agent or the environment provide them.";
  return null;
}

/** `workspace` of `product.plan` and of the config file: the git remote the product's code travels through. */
export const WorkspaceRemote = lazySchema(
  () =>
    z
      .object({
        /** The remote's URL (no credentials: see `remoteUrlProblem`). */
        remote: z
          .string()
          .max(REMOTE_URL_MAX)
          .superRefine((url, ctx) => {
            const problem = remoteUrlProblem(url);
            if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
          }),
        /** The branch (or ref, or commit) of the remote the product starts from; default: the remote's HEAD. */
        baseRef: z
          .string()
          .min(1)
          .max(250)
          .regex(/^[^-\s]\S*$/, "baseRef must be a ref name or a commit (no spaces, not starting with '-').")
          .refine((ref) => !hasControl(ref), "baseRef must not contain control characters.")
          .optional(),
      })
      .strict(),
  "WorkspaceRemote",
);
export type WorkspaceRemote = z.infer<typeof WorkspaceRemote>;
