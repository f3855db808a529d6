/**
 * zod schemas of green-only integration (DESIGN.md guarantee 17; docs/PROTOCOL.md section 5, Verification): the
 * `verify` configuration a client gives `product.plan` (or the config file gives every product), the result of one
 * check, and the `product.taskVerified` notification.
 *
 * Everything a client writes is strict and bounded before any work is done (guarantee 14): at most 20 commands,
 * each `run` at most 10,000 characters, a timeout of at most 24 h, at most 100 environment variables.
 * This file must never import anything but zod, common.ts and lazy-schema.ts.
 */
import * as z from "zod";
import { CommitId, Count, Id } from "./common.js";
import { lazySchema } from "./lazy-schema.js";

/** Default timeout of one check command, in ms (10 minutes). */
export const DEFAULT_CHECK_TIMEOUT_MS = 600_000;
/** The most output kept of one check run, in characters: its first `OUTPUT_HEAD_CHARS` and its last `OUTPUT_TAIL_CHARS`. */
export const OUTPUT_HEAD_CHARS = 2_000;
export const OUTPUT_TAIL_CHARS = 6_000;

/** A check's name as it appears in errors and status: a short word or phrase, no control characters. */
const CheckName = lazySchema(
  () =>
    z
      .string()
      .min(1)
      .max(100)
      .regex(/^[^\p{Cc}]+$/u, "must not contain control characters"),
  "CheckName",
);

/** One check command: run by `/bin/sh -c RUN` in the verify worktree; green when it exits 0 within `timeoutMs`. */
export const VerifyCommand = lazySchema(
  () =>
    z.strictObject({
      name: CheckName,
      run: z.string().min(1).max(10_000),
      timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
    }),
  "VerifyCommand",
);
export type VerifyCommand = z.infer<typeof VerifyCommand>;

/**
 * The `verify` setting (config file and `product.plan`): which commands decide that a candidate commit is green and
 * when they run. `each` (default): every task's merge candidate before the integration branch moves; `end`: once on
 * the final head before the product may be `completed`. `maxParallel` (default 2) bounds checks running at once.
 */
export const VerifyConfig = lazySchema(
  () =>
    z
      .strictObject({
        commands: z.array(VerifyCommand).min(1).max(20),
        when: z.enum(["each", "end"]).optional(),
        env: z
          .record(
            z
              .string()
              .min(1)
              .max(200)
              .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
            z.string().max(10_000),
          )
          .optional(),
        maxParallel: z.number().int().min(1).max(32).optional(),
      })
      .refine((v) => new Set(v.commands.map((c) => c.name)).size === v.commands.length, {
        message: "check names must be unique",
        path: ["commands"],
      })
      .refine((v) => Object.keys(v.env ?? {}).length <= 100, { message: "at most 100 variables", path: ["env"] }),
  "VerifyConfig",
);
export type VerifyConfig = z.infer<typeof VerifyConfig>;

/** The result of one check command on one tree. `exitCode` is null when it was ended by a signal or its timeout. */
export const CheckResult = lazySchema(
  () =>
    z.object({
      name: CheckName,
      ok: z.boolean(),
      exitCode: z.number().int().min(-1).max(255).nullable(),
      /** True when the command ran longer than its `timeoutMs` and was killed (with everything it started). */
      timedOut: z.boolean().optional(),
      durationMs: Count,
      /** The output (stdout and stderr interleaved), head and tail kept, the middle cut with a marker. */
      outputTail: z.string().max(OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS + 200),
    }),
  "CheckResult",
);
export type CheckResult = z.infer<typeof CheckResult>;

/** A git tree id (hex, SHA-1 or SHA-256). */
export const TreeId = lazySchema(
  () => z.string().regex(/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/, "must be a hex tree id"),
  "TreeId",
);

/**
 * `product.taskVerified`: a candidate's checks ran (PROTOCOL.md extension). `taskId` is absent for the final head's
 * check of `when: "end"` and for an on-demand run without a task.
 */
export const TaskVerifiedNotification = lazySchema(
  () =>
    z.object({
      productId: Id,
      taskId: Id.optional(),
      tree: TreeId,
      commit: CommitId,
      ok: z.boolean(),
      checks: z.array(CheckResult).max(20),
    }),
  "TaskVerifiedNotification",
);
export type TaskVerifiedNotification = z.infer<typeof TaskVerifiedNotification>;

/** One recorded verification as `product.status` shows it (newest last, at most 50). */
export const VerificationView = lazySchema(
  () =>
    z.object({
      tree: TreeId,
      commit: CommitId,
      taskId: Id.optional(),
      scope: z.enum(["task", "end", "manual"]),
      ok: z.boolean(),
      at: z.string(),
      checks: z.array(CheckResult).max(20),
    }),
  "VerificationView",
);
export type VerificationView = z.infer<typeof VerificationView>;
