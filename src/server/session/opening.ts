/**
 * Opening sessions (PROTOCOL.md section 4): `session/new`, `session/load` (replays the conversation, the title, the
 * mode, the config options, the commands, the latest plan, each task's tool call and the usage before answering, and
 * nothing of the session after its answer: ACP `session/load`), `session/resume` (replays nothing but the commands,
 * also before answering), `session/list`, the `available_commands_update` sent after the answer of `session/new`,
 * the session's `additionalDirectories`, and the project check of `product.plan {sessionId}`.
 */
import { resolve } from "node:path";
import type { ContentBlock, SessionConfigOption, SessionModeState, SessionUpdate } from "../../../protocol/acp.js";
import type { AttachmentRef } from "./content.js";
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
  /** The content block of a stored attachment of a user message (session/content.ts `attachmentBlock`). */
  attachment(a: AttachmentRef): Promise<ContentBlock>;
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

  /** Announces the commands of a new session once its answer is on its way (PROTOCOL.md section 4). */
  private announceCommandsAfterAnswer(sessionId: string): void {
    setImmediate(() => {
      if (this.o.stopped()) return;
      void this.o.send(sessionId, { sessionUpdate: "available_commands_update", availableCommands: COMMANDS });
    });
  }

  /** `session/new`: `additionalDirectories` were checked by the caller (absolute, existing, normalised). */
  async newSession(cwd: string, additionalDirectories: string[]) {
    const sessionId = this.o.ids("ses");
    const at = this.store.now();
    const git = (await this.o.workspace?.gitHead(cwd).catch(() => null)) ?? null;
    const s = this.store.fresh({
      v: 1,
      sessionId,
      cwd,
      ...(additionalDirectories.length > 0 ? { additionalDirectories } : {}),
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
   * `session/load` (`replay`) and `session/resume`: opens a stored session again. Load replays, as `session/update`s
   * before answering, the conversation, the title, the current mode, the config options, the commands, the latest
   * plan, each task's tool call in its latest state and the usage against a token budget; resume sends only the
   * commands, also before answering. Nothing of the session follows the answer (until the client's next request).
   * Both answer `{modes, configOptions}`. `additionalDirectories` (checked by the caller) replace the stored ones,
   * empty = none (ACP `session-setup`). Throws `not_found` for an unknown session and `ownership` (`{expected: <the
   * session's cwd>, got: cwd}`, -32016) when `cwd` is not the directory the session was created in; nothing is sent
   * then.
   */
  async open(sessionId: string, cwd: string, replay: boolean, additionalDirectories: string[]) {
    const s = await this.store.get(sessionId);
    if (resolve(s.record.cwd) !== resolve(cwd)) {
      throw new DomainError(
        "ownership",
        `Session ${sessionId} belongs to the workspace ${s.record.cwd}, not ${cwd}: ${replay ? "load" : "resume"} it with its own cwd.`,
        { expected: s.record.cwd, got: cwd },
      );
    }
    s.open = true;
    const dirsChanged = (s.record.additionalDirectories ?? []).join("\0") !== additionalDirectories.join("\0");
    if (dirsChanged) {
      if (additionalDirectories.length > 0) s.record.additionalDirectories = additionalDirectories;
      else delete s.record.additionalDirectories;
    }
    if (s.record.closed || dirsChanged) {
      delete s.record.closed;
      await this.store.save(s);
    }
    if (replay) await this.replay(s);
    else await this.o.send(sessionId, { sessionUpdate: "available_commands_update", availableCommands: COMMANDS });
    return this.setup(s);
  }

  private async replay(s: LiveSession): Promise<void> {
    const sessionId = s.record.sessionId;
    for (const m of s.record.messages) {
      const text = m.role === "agent" ? `${m.text.replace(/\n*$/, "")}\n\n` : m.text;
      const messageId = this.o.ids("msg");
      const sessionUpdate = m.role === "user" ? "user_message_chunk" : "agent_message_chunk";
      if (text !== "" || !m.attachments)
        await this.o.send(sessionId, { sessionUpdate, content: { type: "text", text }, messageId });
      for (const a of m.attachments ?? []) {
        await this.o.send(sessionId, { sessionUpdate, content: await this.o.attachment(a), messageId });
      }
    }
    if (s.record.title !== undefined)
      await this.o.send(sessionId, { sessionUpdate: "session_info_update", title: s.record.title });
    const setup = this.setup(s);
    await this.o.send(sessionId, { sessionUpdate: "current_mode_update", currentModeId: setup.modes.currentModeId });
    await this.o.send(sessionId, { sessionUpdate: "config_option_update", configOptions: setup.configOptions });
    await this.o.send(sessionId, { sessionUpdate: "available_commands_update", availableCommands: COMMANDS });
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
    const { usage, budget } = product.model.state;
    if (budget.maxTotalTokens !== undefined) {
      const used = Math.max(0, Math.round(usage.inputTokens + usage.outputTokens));
      await this.o.send(sessionId, { sessionUpdate: "usage_update", used, size: Math.round(budget.maxTotalTokens) });
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
        ...(r.additionalDirectories !== undefined ? { additionalDirectories: r.additionalDirectories } : {}),
        ...(r.title !== undefined ? { title: r.title } : {}),
        updatedAt: r.updatedAt,
      })),
    };
  }
}
