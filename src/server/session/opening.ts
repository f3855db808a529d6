/**
 * Opening sessions (PROTOCOL.md section 4): `session/new`, `session/load` (replays the conversation, the latest plan
 * and each task's tool call before answering), `session/resume` (replays nothing), `session/list`, the
 * `available_commands_update` sent after the answer that introduced a session, and the project check of
 * `product.plan {sessionId}`.
 */
import { resolve } from "node:path";
import type { SessionConfigOption, SessionModeState, SessionUpdate } from "../../../protocol/acp.js";
import { DomainError, isDomainError } from "../../core/errors.js";
import type { ProductService } from "../../core/product/service.js";
import type { IdGenerator, WorkspaceProbe } from "../../core/ports.js";
import { invalidParams } from "../wire-errors.js";
import { COMMANDS } from "./commands.js";
import {
  configOptions,
  DEFAULT_MODE,
  defaultConfig,
  modeState,
  type SessionConfig,
  type SettingsContext,
} from "./settings.js";
import type { LiveSession, SessionStore } from "./store.js";
import { planEntries, taskToolCallId, toolStatus, toolText } from "./view.js";

/** What opening sessions needs from the adapter. */
export interface SessionOpeningDeps {
  store: SessionStore;
  products: ProductService;
  settings: SettingsContext;
  ids: IdGenerator;
  projectIdFor(cwd: string): string;
  /** Decides the default `isolation` of a new session (a git checkout with a commit → `worktree`). */
  workspace?: WorkspaceProbe;
  /** Sends one `session/update`; never rejects. */
  send(sessionId: string, update: SessionUpdate): Promise<void>;
  /** True once the server shuts down (no more announcements). */
  stopped(): boolean;
}

/** A session's config options (the defaults of a session stored before it had any). */
export function configOf(s: LiveSession, settings: SettingsContext): SessionConfig {
  return s.record.config ?? defaultConfig(settings, false);
}

/** `session/new`, `load`, `resume`, `list` of one connection. */
export class SessionOpening {
  constructor(private readonly o: SessionOpeningDeps) {}

  private get store(): SessionStore {
    return this.o.store;
  }

  setup(s: LiveSession): { modes: SessionModeState; configOptions: SessionConfigOption[] } {
    return {
      modes: modeState(s.record.modeId ?? DEFAULT_MODE),
      configOptions: configOptions(this.o.settings, configOf(s, this.o.settings)),
    };
  }

  /** Announces the commands once the answer that introduced the session is on its way (PROTOCOL.md section 4). */
  private announceCommandsAfterAnswer(sessionId: string): void {
    setImmediate(() => {
      if (this.o.stopped()) return;
      void this.o.send(sessionId, { sessionUpdate: "available_commands_update", availableCommands: COMMANDS });
    });
  }

  async newSession(cwd: string) {
    const sessionId = this.o.ids("ses");
    const at = this.store.now();
    const git = (await this.o.workspace?.gitHead(cwd).catch(() => null)) ?? null;
    const s = this.store.fresh({
      v: 1,
      sessionId,
      cwd,
      projectId: this.o.projectIdFor(cwd),
      modeId: DEFAULT_MODE,
      config: defaultConfig(this.o.settings, git !== null),
      createdAt: at,
      updatedAt: at,
      messages: [],
    });
    await this.store.save(s);
    s.open = true;
    this.store.live.set(sessionId, s);
    this.announceCommandsAfterAnswer(sessionId);
    return { sessionId, ...this.setup(s) };
  }

  /**
   * `session/load` (`replay`) and `session/resume`: opens a stored session again. Load replays the conversation, the
   * latest plan and each task's tool call in its latest state as `session/update`s before answering; resume replays
   * nothing. Both answer `{modes, configOptions}` and then announce the commands. Throws `not_found` for an unknown
   * session and `ownership` (`{expected: <the session's cwd>, got: cwd}`, -32016) when `cwd` is not the directory
   * the session was created in; nothing is replayed then.
   */
  async open(sessionId: string, cwd: string, replay: boolean) {
    const s = await this.store.get(sessionId);
    if (resolve(s.record.cwd) !== resolve(cwd)) {
      throw new DomainError(
        "ownership",
        `Session ${sessionId} belongs to the workspace ${s.record.cwd}, not ${cwd}: ${replay ? "load" : "resume"} it with its own cwd.`,
        { expected: s.record.cwd, got: cwd },
      );
    }
    s.open = true;
    if (s.record.closed) {
      delete s.record.closed;
      await this.store.save(s);
    }
    if (replay) await this.replay(s);
    this.announceCommandsAfterAnswer(sessionId);
    return this.setup(s);
  }

  private async replay(s: LiveSession): Promise<void> {
    const sessionId = s.record.sessionId;
    for (const m of s.record.messages) {
      const text = m.role === "agent" ? `${m.text.replace(/\n*$/, "")}\n\n` : m.text;
      await this.o.send(sessionId, {
        sessionUpdate: m.role === "user" ? "user_message_chunk" : "agent_message_chunk",
        content: { type: "text", text },
        messageId: this.o.ids("msg"),
      });
    }
    if (s.record.title !== undefined)
      await this.o.send(sessionId, { sessionUpdate: "session_info_update", title: s.record.title });
    if (!s.record.productId) return;
    // A deleted product: the conversation is still replayed, without a plan.
    const product = await this.o.products.get(s.record.productId).catch(() => undefined);
    if (!product) return;
    const entries = planEntries(product);
    if (entries.length > 0) await this.o.send(sessionId, { sessionUpdate: "plan", entries });
    s.announcedFor = product.productId;
    s.announced.clear();
    for (const task of product.model.state.tasks) {
      s.announced.set(task.taskId, task.status);
      const text = toolText(task);
      await this.o.send(sessionId, {
        sessionUpdate: "tool_call",
        toolCallId: taskToolCallId(product.productId, task.taskId),
        title: task.title,
        kind: "other",
        status: toolStatus(task.status),
        ...(text ? { content: [{ type: "content", content: { type: "text", text } }] } : {}),
      });
    }
  }

  /**
   * For `product.plan {sessionId}`: throws `ownership` (`{expected: <the session's project>, got: projectId}`, -32016)
   * when `sessionId` names a stored session of another project. Read-only; an unknown `sessionId` is accepted (the
   * product only records it), as before.
   */
  async assertSessionProject(sessionId: string, projectId: string): Promise<void> {
    const s = await this.store.get(sessionId).catch((err: unknown) => {
      if (isDomainError(err, "not_found")) return undefined;
      throw err;
    });
    if (s && s.record.projectId !== projectId) {
      throw new DomainError(
        "ownership",
        `Session ${sessionId} belongs to project ${s.record.projectId}, not ${projectId}: ` +
          "plan in its project or omit sessionId.",
        { expected: s.record.projectId, got: projectId },
      );
    }
  }

  /** `session/list`: every readable session record (newest first), optionally only those of `cwd`. One page. */
  async list(cwd: string | undefined, cursor: string | undefined) {
    if (cursor !== undefined) {
      throw invalidParams([
        { path: ["cursor"], message: "is not a cursor this server issued (session/list has one page)" },
      ]);
    }
    const records = await this.store.list(cwd);
    return {
      sessions: records.map((r) => ({
        sessionId: r.sessionId,
        cwd: r.cwd,
        ...(r.title !== undefined ? { title: r.title } : {}),
        updatedAt: r.updatedAt,
      })),
    };
  }
}
