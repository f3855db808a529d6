/**
 * The requests a worker agent sends to us as its ACP client during one attempt (ACP v1 `session/request_permission`,
 * `fs/read_text_file`, `fs/write_text_file`; DESIGN.md, Agents): permission questions go to the IDE first, else the
 * permission policy decides (issue 11: every refusal reported and kept; issue 12: the isolated default); file
 * requests are served inside the task's workspace and the product's additional directories only (workspace-fs.ts:
 * never `.git`, guarantee 16). Split from
 * worker-attempt.ts (issue 27), which composes one of these per attempt.
 */
import { RequestError } from "@agentclientprotocol/sdk";
import type {
  ReadTextFileRequest,
  ReadTextFileResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  WriteTextFileRequest,
  WriteTextFileResponse,
} from "@agentclientprotocol/sdk";
import type { Logger, RefusedPermission, WorkerEvents, WorkerRequest } from "../../core/ports.js";
import { describePolicy } from "./registry.js";
import type { PermissionPolicy } from "./registry.js";
import { oneLine } from "./worker-output.js";
import type { ToolCallLedger } from "./worker-output.js";
import { choosePermission, isRefusal } from "./worker-permissions.js";
import type { PermissionForwarder } from "./worker-permissions.js";
import { WorkspaceFs, WorkspaceFsError } from "./workspace-fs.js";

/** What the attempt shares with its client-request handler; the functions are read at request time. */
export interface WorkerClientDeps {
  request: WorkerRequest;
  agentId: string;
  options: {
    permissions: PermissionPolicy;
    isolatedPermissions?: PermissionPolicy;
    forwarder: () => PermissionForwarder | undefined;
  };
  log: Logger;
  events: WorkerEvents;
  /** The attempt's tool calls so far (their kind and title complete a permission request). */
  toolCalls: ToolCallLedger;
  /** True once the attempt was asked to stop: requests then answer `cancelled` / -32800. */
  stopped: () => boolean;
  /** The attempt's ACP session id, once `session/new` answered. */
  sessionId: () => string | undefined;
  /** The additional directories the agent's `session/new` carried (issue 31): further roots of its file requests. */
  additionalRoots: () => readonly string[];
  /** Aborted when the attempt stops: withdraws permission questions forwarded to the IDE. */
  signal: AbortSignal;
}

/** Serves one attempt's permission and file requests. Construct once per attempt; never throws but JSON-RPC errors. */
export class WorkerClientRequests {
  private readonly refused_: RefusedPermission[] = [];
  private workspace: WorkspaceFs | undefined;

  constructor(private readonly deps: WorkerClientDeps) {}

  /** Every permission refused so far in this attempt (by the policy or by the client), in order. */
  get refusals(): readonly RefusedPermission[] {
    return this.refused_;
  }

  /**
   * A worker's `session/request_permission`, with `kind`/`title` completed from its earlier tool call of the same id:
   * forwarded to the IDE when the pool's forwarder can reach one for this product; otherwise (or when it says nobody
   * can answer) the `permissions` policy decides by tool kind. An IDE answer naming an option the worker did not
   * offer, or an IDE that fails to answer, gets the worker a reject option. Every refusal is reported and kept. A
   * stopped attempt answers `cancelled`.
   */
  async onPermission(raw: RequestPermissionRequest): Promise<RequestPermissionResponse> {
    if (this.deps.stopped()) return { outcome: { outcome: "cancelled" } };
    const known = this.deps.toolCalls.get(raw.toolCall.toolCallId);
    const kind = raw.toolCall.kind ?? known?.kind;
    const titled = raw.toolCall.title ?? (known?.title !== undefined && known.title !== "" ? known.title : undefined);
    const title = oneLine(titled ?? raw.toolCall.toolCallId);
    const params: RequestPermissionRequest = {
      ...raw,
      toolCall: { ...raw.toolCall, title, ...(kind !== undefined ? { kind: kind as never } : {}) },
    };
    const forwarder = this.deps.options.forwarder();
    if (forwarder !== undefined) {
      let forwarded: RequestPermissionResponse | undefined;
      try {
        forwarded = await forwarder({
          productId: this.deps.request.productId,
          taskId: this.deps.request.task.taskId,
          taskTitle: this.deps.request.task.title,
          attempt: this.deps.request.attempt,
          agentId: this.deps.agentId,
          params,
          signal: this.deps.signal,
        });
      } catch (error) {
        if (this.deps.stopped()) return { outcome: { outcome: "cancelled" } };
        this.deps.log.warn({ err: error, tool: title }, "the IDE did not answer a worker permission request; denied");
        this.refused(raw.toolCall.toolCallId, kind, title, "client");
        return choosePermission(params.options, "deny");
      }
      if (this.deps.stopped()) return { outcome: { outcome: "cancelled" } };
      if (forwarded !== undefined) {
        const outcome = forwarded.outcome;
        if (outcome.outcome === "selected" && !params.options.some((o) => o.optionId === outcome.optionId)) {
          this.deps.log.warn(
            { tool: title, answer: outcome.optionId },
            "the IDE chose an option the worker did not offer; denied",
          );
          this.refused(raw.toolCall.toolCallId, kind, title, "client");
          return choosePermission(params.options, "deny");
        }
        this.deps.log.info({ tool: title, answer: outcome }, "worker permission request answered by the IDE");
        if (isRefusal(forwarded, params.options)) this.refused(raw.toolCall.toolCallId, kind, title, "client");
        return outcome.outcome === "cancelled"
          ? { outcome: { outcome: "cancelled" } }
          : { outcome: { outcome: "selected", optionId: outcome.optionId } };
      }
    }
    const policy = this.policy();
    const answer = choosePermission(params.options, policy, kind);
    this.deps.log.info(
      { tool: title, kind: kind ?? "other", policy, answer: answer.outcome },
      "answered worker permission request by policy",
    );
    if (isRefusal(answer, params.options)) this.refused(raw.toolCall.toolCallId, kind, title, "policy");
    return answer;
  }

  /**
   * The policy that answers this attempt's permission requests when no IDE does: the isolated default for an attempt
   * in its own worktree when the config file set no `permissions` (issue 12), else the configured one.
   */
  policy(): PermissionPolicy {
    return (
      (this.deps.request.isolated ? this.deps.options.isolatedPermissions : undefined) ?? this.deps.options.permissions
    );
  }

  /** Reports and keeps one refusal; the tool call's activity says it was refused. */
  private refused(toolCallId: string, kind: string | undefined, title: string, by: "policy" | "client"): void {
    const refusal: RefusedPermission = { kind: kind ?? "other", title, by };
    this.refused_.push(refusal);
    const who = by === "policy" ? `the permission policy ${describePolicy(this.policy())}` : "the client";
    this.safely(() => this.deps.events.onPermissionRefused?.(refusal));
    this.safely(() =>
      this.deps.events.onActivity(oneLine(`${title} (${refusal.kind}): refused by ${who}`), toolCallId),
    );
  }

  /**
   * The file-system view of this attempt (the task's cwd, then the additional directories its session was given), or
   * a refusal when the request is not for our session. Built at the first request (after `session/new` answered).
   */
  private workspaceFor(sessionId: string, path: string): WorkspaceFs {
    if (this.deps.stopped()) {
      throw new RequestError(-32800, "The task was stopped; the file request was not served.", { path });
    }
    if (this.deps.sessionId() === undefined || sessionId !== this.deps.sessionId()) {
      throw RequestError.invalidParams({ path, sessionId }, `Unknown session "${sessionId}" for this worker.`);
    }
    const checkout = this.deps.request.isolated === true ? this.deps.request.checkout : undefined;
    this.workspace ??= new WorkspaceFs(this.deps.request.root ?? this.deps.request.cwd, {
      additionalRoots: this.deps.additionalRoots(),
      ...(checkout !== undefined ? { protectedRoots: [checkout] } : {}),
    });
    return this.workspace;
  }

  /**
   * `fs/read_text_file`: served inside the task's workspace and the product's additional directories only
   * (workspace-fs.ts); refusals are JSON-RPC errors.
   */
  async onReadTextFile(params: ReadTextFileRequest): Promise<ReadTextFileResponse> {
    try {
      const fs = this.workspaceFor(params.sessionId, params.path);
      const content = await fs.readTextFile(params.path, { line: params.line ?? null, limit: params.limit ?? null });
      this.deps.log.debug({ path: params.path, chars: content.length }, "worker read a file");
      return { content };
    } catch (error) {
      throw this.fsRefusal("read", params.path, error);
    }
  }

  /** `fs/write_text_file`: served inside the same roots as reads; nothing is written on refusal. */
  async onWriteTextFile(params: WriteTextFileRequest): Promise<WriteTextFileResponse> {
    try {
      const fs = this.workspaceFor(params.sessionId, params.path);
      await fs.writeTextFile(params.path, params.content);
      this.deps.log.debug({ path: params.path, chars: params.content.length }, "worker wrote a file");
      return {};
    } catch (error) {
      throw this.fsRefusal("write", params.path, error);
    }
  }

  private fsRefusal(op: "read" | "write", path: string, error: unknown): RequestError {
    if (error instanceof RequestError) return error;
    if (error instanceof WorkspaceFsError) {
      this.deps.log.info({ op, path, reason: error.data.reason }, "worker file request refused");
      return new RequestError(error.code, error.message, error.data);
    }
    this.deps.log.warn({ err: error, op, path }, "worker file request failed");
    return RequestError.internalError({ path }, `Could not ${op} ${path}.`);
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.deps.log.warn({ err: error }, "worker event handler threw; ignored");
    }
  }
}
