/**
 * The dashboard's buttons (issue 29, "Dashboard controls"): `POST /api/control` with a JSON body
 * `{verb, productId, taskId?, checkpointId?, text?, requestId?}`, verb one of pause, resume, cancel, checkpoint, retry
 * (`taskId`), rollback (`checkpointId`, default the latest), confirm, answer (`taskId`, `text`: the waiting task's
 * answer), message (`text`, to the leader), merge.
 *
 * Every verb but merge is filed as a control request through the run-state authority for the server that owns the
 * product (operator/control-client.ts, the path of the CLI's verbs; docs/PROTOCOL.md section 8), which executes it
 * through the same ProductService call as the JSON-RPC method. Merge brings a completed product into the branch
 * checked out in the product's repository (operator/product-merge.ts, the rules of `merge ID`).
 *
 * CSRF-proof by construction; a request that fails any check is 403 and nothing is read, filed or changed:
 * - POST only, body `application/json` (else 403: a cross-site form cannot send it; a cross-site fetch with it is preflighted,
 *   and the dashboard answers no CORS), at most 64 KiB, validated by zod before anything happens;
 * - an `Origin` header equal to `http://` + the request's Host (the page itself);
 * - the per-launch secret in `x-acp-dashboard-key`: `ui` prints it in the URL it opens (`?key=…`), the page sends it;
 * - the Host check of every route (loopback names only while bound to loopback; dashboard-server.ts).
 * Answers: 200 `{kind: "done", message, result, by, acceptedAfterMs, answeredAfterMs}`; 409 `{error, code}` when the
 * owner refused it or no server owns the product (then nothing ran: the page says which CLI verb takes ownership);
 * 504 when the owner accepted it but has not answered (its effect shows in the product's status).
 */
import { timingSafeEqual } from "node:crypto";
import { hostname } from "node:os";
import type { IncomingMessage, ServerResponse } from "node:http";
import * as z from "zod";
import { Id } from "../../protocol/common.js";
import { isDomainError } from "../core/errors.js";
import type { OwnerLiveness, RunStateAuthority } from "../core/ports.js";
import { RequestId, type ControlMethod } from "../core/product/control-requests.js";
import { requestControl, type ControlCall, type ControlOutcome } from "../operator/control-client.js";
import { ChangeUnavailable, productCwd } from "../operator/product-git.js";
import { mergeProduct } from "../operator/product-merge.js";
import type { RunStateReader } from "../operator/run-state-reader.js";
import { HttpError, readJsonBody, sendJson } from "./http-kit.js";

/** Longest control request body, bytes (checked before it is parsed; guarantee 14). */
export const MAX_CONTROL_BODY_BYTES = 64 * 1024;

/** The header that carries the per-launch secret. */
export const SECRET_HEADER = "x-acp-dashboard-key";

/** What the dashboard needs to file control requests. */
export interface DashboardControl {
  /** The per-launch secret (printed by `ui` in the URL it opens). */
  secret: string;
  /** The store, writable (opened on first use by the caller; closed by it). */
  authority(): Promise<RunStateAuthority>;
  liveness?: OwnerLiveness;
  /** How the CLI names the store, for the sentence that tells which command takes ownership. */
  stateArg: string;
}

const common = { productId: Id, requestId: RequestId.optional() };
const Text = z.string().min(1).max(32_000);

/** A button's request (the body of `POST /api/control`). */
export const ControlBody = z.discriminatedUnion("verb", [
  z.strictObject({ verb: z.literal("pause"), ...common }),
  z.strictObject({ verb: z.literal("resume"), ...common }),
  z.strictObject({ verb: z.literal("cancel"), ...common }),
  z.strictObject({ verb: z.literal("checkpoint"), ...common }),
  z.strictObject({ verb: z.literal("retry"), taskId: Id, ...common }),
  z.strictObject({ verb: z.literal("rollback"), checkpointId: Id.optional(), ...common }),
  z.strictObject({ verb: z.literal("confirm"), ...common }),
  z.strictObject({ verb: z.literal("answer"), taskId: Id, text: Text, ...common }),
  z.strictObject({ verb: z.literal("message"), text: Text, ...common }),
  z.strictObject({ verb: z.literal("merge"), ...common }),
]);
export type ControlBody = z.infer<typeof ControlBody>;

/** The control request a verb files (merge files none). */
function callOf(body: Exclude<ControlBody, { verb: "merge" }>): Omit<ControlCall, "by"> {
  const { productId } = body;
  const simple: Record<string, ControlMethod> = {
    pause: "product.pause",
    resume: "product.resume",
    cancel: "product.cancel",
    checkpoint: "product.checkpoint",
    confirm: "product.confirm",
  };
  const base = body.requestId !== undefined ? { productId, requestId: body.requestId } : { productId };
  switch (body.verb) {
    case "retry":
      return { ...base, method: "product.replayTask", params: { taskId: body.taskId } };
    case "rollback":
      return {
        ...base,
        method: "product.rollback",
        ...(body.checkpointId !== undefined ? { params: { checkpointId: body.checkpointId } } : {}),
      };
    case "answer":
      return { ...base, method: "product.message", params: { content: body.text }, waitingTask: body.taskId };
    case "message":
      return { ...base, method: "product.message", params: { content: body.text } };
    default:
      return { ...base, method: simple[body.verb] as ControlMethod };
  }
}

/** Throws HttpError 403 unless the request comes from the page itself with this launch's secret. */
export function checkMutating(req: IncomingMessage, secret: string): void {
  const origin = req.headers.origin;
  if (origin === undefined || origin !== `http://${req.headers.host ?? ""}`) {
    throw new HttpError(403, "The dashboard changes products only for requests from its own page (Origin).");
  }
  const given = Buffer.from(String(req.headers[SECRET_HEADER] ?? ""));
  const want = Buffer.from(secret);
  if (given.length !== want.length || !timingSafeEqual(given, want)) {
    throw new HttpError(403, "The dashboard changes products only with the key of the address `ui` printed.");
  }
}

/** The answer of an outcome: status and JSON. */
function answerOf(body: ControlBody, outcome: ControlOutcome, stateArg: string): [number, Record<string, unknown>] {
  switch (outcome.kind) {
    case "done":
      return [200, { ...outcome, message: `${body.verb}: done by ${outcome.by}` }];
    case "refused":
      return [409, { error: outcome.error.message, code: outcome.error.code }];
    case "unanswered":
      return [
        504,
        { error: `${outcome.by} accepted the request but has not answered; the product's status shows what happened.` },
      ];
    case "unclaimed":
      return [
        409,
        {
          code: "unowned",
          error:
            outcome.owner !== undefined
              ? `The server that owns ${body.productId} (${outcome.owner}) did not take the request; nothing was changed.`
              : `No running server owns ${body.productId}, so nothing was changed; in a terminal, ` +
                `"acp-orchestrator ${body.verb === "retry" ? "retry" : body.verb} ${body.productId} --state ${stateArg}" ` +
                "takes it over and does it.",
        },
      ];
  }
}

/** Handles `POST /api/control` (see the header). */
export async function handleControl(
  req: IncomingMessage,
  res: ServerResponse,
  control: DashboardControl,
  reader: RunStateReader,
): Promise<void> {
  checkMutating(req, control.secret);
  const type = String(req.headers["content-type"] ?? "")
    .split(";")[0]
    ?.trim()
    .toLowerCase();
  if (type !== "application/json") throw new HttpError(403, "The dashboard changes products only for JSON requests.");
  const parsed = ControlBody.safeParse(await readJsonBody(req, MAX_CONTROL_BODY_BYTES));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new HttpError(
      400,
      `The control request is invalid at ${issue?.path.join(".") || "its top"}: ${issue?.message}.`,
    );
  }
  const body = parsed.data;
  if (body.verb === "merge") {
    try {
      const outcome = await mergeProduct(reader, body.productId, await productCwd(reader, body.productId));
      return sendJson(
        res,
        outcome.merged ? 200 : 409,
        outcome.merged ? { kind: "done", ...outcome } : { error: outcome.message },
      );
    } catch (err) {
      if (err instanceof ChangeUnavailable) throw new HttpError(409, err.message);
      if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
      throw err;
    }
  }
  let outcome: ControlOutcome;
  try {
    outcome = await requestControl(await control.authority(), control.liveness, {
      ...callOf(body),
      by: `dashboard:${hostname()}:${process.pid}`,
    });
  } catch (err) {
    if (isDomainError(err, "not_found")) throw new HttpError(404, err.message);
    throw err;
  }
  const [status, answer] = answerOf(body, outcome, control.stateArg);
  sendJson(res, status, answer);
}
