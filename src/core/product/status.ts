/**
 * What a product reports about itself: `product.status` from memory, `inspect` with what only the authority and the
 * workspace know, and the plain-words recovery of a paused, failed or ownerless run (guarantee 10). Never writes
 * (guarantee 3).
 *
 * This file must never import I/O.
 */
import { TerminalPhases, type Progress } from "../../../protocol/common.js";
import type { Drift } from "./fingerprint.js";
import type { LeaseHolder } from "./lease.js";
import { progressOfModel } from "./state.js";
import type { ProductParts } from "./parts.js";
import { integrationView, isolationNote } from "../workspace/integration.js";
import { tasksWithWaits, type WaitFacts } from "./task-waits.js";
import { verificationStatus } from "../workspace/verification.js";
import { withSupersededBy } from "./supersession.js";

/** What `inspect()` adds to a recovery when the run's inputs drifted (issue 4, drift detection). */
export interface DriftRecovery {
  cause: string;
  resumable: boolean;
  remediation: string;
  /** True: an automatic resume must not continue; only an explicit `product.resume` acknowledges the drift. */
  needsExplicitResume: true;
  drift: { what: Drift["what"]; from: string | null; to: string | null; agents?: Drift["agents"] }[];
}

/**
 * A `product.status` answer with its version: while `version` is unchanged, so is the answer (see
 * `StatusView.inspectVersioned`). `undefined` when the answer can change without a version to show it.
 */
export interface VersionedStatus {
  status: Record<string, unknown>;
  version: string | undefined;
}

/** What a product reports about itself, from the parts of its orchestrator (parts.ts); never writes. */
export class StatusView {
  /** The last versioned answer of `inspectVersioned`, with the state object it was built from. */
  #kept: (VersionedStatus & { version: string; state: object; parts: VersionParts }) | undefined;

  /**
   * `instance`: the number of this orchestrator instance among those of its service (service.ts numbers them), so two
   * instances never share an answer version.
   */
  constructor(
    private readonly p: ProductParts,
    private readonly instance: number,
  ) {}

  // -------------------------------------------------------------------------------------------------------------
  // Status

  /** The `product.status` result (PROTOCOL.md section 5), computed from memory; never writes (guarantee 3). */
  status(): Record<string, unknown> {
    const s = this.p.model.state;
    const used = s.usage.inputTokens + s.usage.outputTokens;
    const last = s.checkpoints[s.checkpoints.length - 1];
    const recovery = this.recovery();
    return {
      productId: s.productId,
      projectId: s.projectId,
      name: s.name,
      phase: s.phase,
      ...(s.plan ? { plan: s.plan } : {}),
      tasks: withSupersededBy(tasksWithWaits(s, this.waitFacts())),
      progress: this.progress(),
      budget: {
        usedTokens: used,
        inputTokens: s.usage.inputTokens,
        outputTokens: s.usage.outputTokens,
        elapsedMs: this.p.timers.liveElapsedMs(),
        ...(s.budget.maxTotalTokens !== undefined ? { maxTotalTokens: s.budget.maxTotalTokens } : {}),
        ...(s.budget.maxDurationMs !== undefined ? { maxDurationMs: s.budget.maxDurationMs } : {}),
        tokenSource:
          used === 0
            ? "none"
            : s.usage.estimatedTokens === 0
              ? "reported"
              : s.usage.estimatedTokens >= used
                ? "estimated"
                : "mixed",
      },
      checkpoints: s.checkpoints.length,
      ...(last ? { lastCheckpointAt: last.at } : {}),
      dropped: this.p.health.dropped,
      ...(recovery ? { recovery } : {}),
      ...this.isolationStatus(),
    };
  }

  /**
   * A run a live owner elsewhere drives: its clock runs there, and the stored `elapsedMs` is as old as the owner's
   * last `elapsed` event (a new user's trial, item 5: `status` said "1 ms" of a run going for a minute). The time since
   * that event (`usage.elapsedAt`, the owner's clock) is added, as the owner's own answer would have it.
   */
  private addOwnersSpan(status: Record<string, unknown>): void {
    const at = Date.parse(this.p.model.state.usage.elapsedAt ?? "");
    const budget = status.budget as { elapsedMs: number };
    if (Number.isFinite(at)) budget.elapsedMs += Math.max(0, this.p.ctx.clock.now() - at);
  }

  /** What `tasksWithWaits` needs from this process (task-waits.ts, issue 28). */
  private waitFacts(): WaitFacts {
    return {
      leaderBusy: this.p.leader.leaderBusy,
      overloaded: this.p.pool.overloaded(),
      nowMs: this.p.ctx.clock.now(),
    };
  }

  /**
   * `progress` of `product.status` and `product.list`: the stored counts, except that a product nobody executes (not
   * in phase `executing`, e.g. paused after a persistence failure, guarantee 2) counts a task as running only while
   * its worker still runs in this process; the others were stopped and will run again, so they count as pending.
   */
  progress(): Progress {
    const p = progressOfModel(this.p.model);
    if (this.p.model.state.phase === "executing" || p.running === 0) return p;
    const running = Math.min(p.running, this.p.pool.size);
    return { ...p, running, pending: p.pending + (p.running - running) };
  }

  /**
   * `product.status` with what only the authority and the workspace know (guarantee 10, issue 4): for a product this
   * process does not drive, its state is first brought up to date with the authority; a live lease of another
   * process is reported as such; and a paused or ownerless run whose inputs drifted since its last checkpoint (plan
   * or leader prompt version, workspace git HEAD, agent definitions) says which changed, old → new, and that it needs
   * an explicit `product.resume` (`recovery.needsExplicitResume`). Never writes (guarantee 3).
   */
  async inspect(): Promise<Record<string, unknown>> {
    return (await this.inspectVersioned()).status;
  }

  /**
   * `inspect()` with a version (issue 16, hosts polling `product.status`): two answers with the same defined
   * `version` are the same answer, so a caller that kept the text of the first may send it again. An answer gets a
   * version only when nothing outside the store and this instance can change it: the authority has change marks,
   * this process neither drives the product nor runs any of its workers, no lease record exists, and the phase needs
   * no workspace look (not `executing` or `paused`, or the product is refused for lost or invalid records). The
   * version then covers the store's change mark (every write, this process's or another's, moves it), the state's
   * sequence number and object (every event and every reload), an epoch bumped by in-memory-only changes (a failed
   * write pausing the run, guarantee 2), and the counters the answer shows. While the version is unchanged, the
   * answer kept with it is returned again, the same object, without a catch-up read or a rebuild. `mark`: the store's
   * `changeMark()`, read now or by the caller just before. Never writes.
   */
  async inspectVersioned(mark = this.p.ctx.store.changeMark()): Promise<VersionedStatus> {
    const kept = this.keptAnswer(mark);
    if (kept !== undefined) return kept;
    // One look at whether the store changed serves both reads below (issue 16): while it did not, neither is repeated.
    if (!this.p.run.driving && this.p.pool.size === 0) await this.p.sections.run(() => this.p.access.catchUpNow(mark));
    const status = this.status();
    // Taken with the answer it describes: a change while the lease is read below gives a later call another version.
    const parts = this.versionable(mark) ? this.versionParts(mark) : undefined;
    const version = parts === undefined ? undefined : versionText(this.instance, parts);
    const state = this.p.model.state;
    const phase = state.phase;
    // Guarantee 13: who holds the lease, until when, and whether that owner is live (PROTOCOL.md section 5, Owner).
    const holder = await this.p.ownership.holder(mark);
    if (holder) {
      status.owner = {
        ownerId: holder.owner,
        expiresAt: holder.expiresAt,
        live: holder.live,
        ...(holder.renewedAt !== undefined ? { renewedAt: holder.renewedAt } : {}),
      };
      if (holder.live && phase === "executing" && !this.p.run.driving) this.addOwnersSpan(status);
    }
    // A product that lost events stays refused whatever else changed (guarantee 4 outranks drift).
    if (
      this.p.health.lost > 0 ||
      this.p.health.invalid !== undefined ||
      this.p.run.driving ||
      (phase !== "executing" && phase !== "paused")
    ) {
      if (version === undefined || holder !== null) return { status, version: undefined };
      this.#kept = { status, version, state, parts: parts as VersionParts };
      return { status, version };
    }
    return { status: await this.inspectRun(status, holder), version: undefined };
  }

  /**
   * The answer `inspectVersioned` kept, when its version is still the current one at `mark` (the store's
   * `changeMark()`, taken now); else `undefined`, and the kept answer is dropped. Synchronous, so that a caller can
   * answer an unchanged product in the turn its request arrived. Never reads or writes the store.
   */
  keptAnswer(mark: string | undefined): VersionedStatus | undefined {
    const kept = this.#kept;
    if (kept === undefined) return undefined;
    if (mark !== undefined && kept.state === this.p.model.state && this.isCurrent(kept.parts, mark)) return kept;
    this.#kept = undefined;
    return undefined;
  }

  /** True when an answer built now could get a version (see `inspectVersioned`), before the lease is read. */
  private versionable(mark: string | undefined): mark is string {
    return mark !== undefined && !this.p.run.driving && this.p.pool.size === 0 && !this.p.timers.counting;
  }

  /** What the answer version at `mark` is made of (see `inspectVersioned`). */
  private versionParts(mark: string): VersionParts {
    return {
      epoch: this.p.health.statusEpoch,
      mark,
      seq: this.p.model.state.seq,
      dropped: this.p.health.dropped,
      lost: this.p.health.lost,
      invalid: this.p.health.invalid,
      planningStarted: this.p.leader.planningStarted,
      loadedFromStore: this.p.health.loadedFromStore,
      driving: this.p.run.driving,
      running: this.p.pool.size,
    };
  }

  /**
   * True when the version made of `parts` is still the version at `mark`: compared part by part, so that an unchanged
   * product is answered without building its version again (issue 16, request path).
   */
  private isCurrent(parts: VersionParts, mark: string): boolean {
    return (
      parts.mark === mark &&
      parts.epoch === this.p.health.statusEpoch &&
      parts.seq === this.p.model.state.seq &&
      parts.dropped === this.p.health.dropped &&
      parts.lost === this.p.health.lost &&
      parts.invalid === this.p.health.invalid &&
      parts.planningStarted === this.p.leader.planningStarted &&
      parts.loadedFromStore === this.p.health.loadedFromStore &&
      parts.driving === this.p.run.driving &&
      parts.running === this.p.pool.size
    );
  }

  /** The rest of `inspect()` for an executing or paused product: another owner, a dead owner, drift since the checkpoint. */
  private async inspectRun(
    status: Record<string, unknown>,
    holder: LeaseHolder | null,
  ): Promise<Record<string, unknown>> {
    const phase = this.p.model.state.phase;
    // Driven by a live server elsewhere (issue 28): nothing to recover (not "no process is driving"); `owner` says
    // who drives it and when it last renewed. Its inputs are that server's to judge.
    if (holder && holder.live && !holder.mine) {
      if (phase === "executing") delete status.recovery;
      return status;
    }
    if (holder && !holder.mine && holder.process === "dead" && phase === "executing") {
      status.recovery = {
        cause: `The server process that drove this product (owner ${holder.owner}) is gone.`,
        resumable: true,
        remediation:
          "Call product.resume to continue at once; tasks that were running will run again, completed ones are kept.",
      };
    }
    const drift = await this.p.inputs.drift();
    if (drift.length === 0) return status;
    const base = this.recovery();
    const recovery: DriftRecovery = {
      cause: `${base ? `${base.cause} ` : ""}Since its last checkpoint ${drift.map((d) => d.text).join("; ")}.`,
      resumable: true,
      remediation:
        "Check that the workspace and the agents are as the run expects, then call product.resume to continue " +
        "explicitly (completed tasks are kept); an automatic resume will not continue on its own.",
      needsExplicitResume: true,
      drift: drift.map((d) => ({ what: d.what, from: d.from, to: d.to, ...(d.agents ? { agents: d.agents } : {}) })),
    };
    status.recovery = recovery;
    return status;
  }

  /** `isolation`, `isolationNote` and `integration` of `product.status` (PROTOCOL.md section 5); empty before confirmation. */
  private isolationStatus(): Record<string, unknown> {
    const s = this.p.model.state;
    if (!s.isolation) return {};
    const note = isolationNote(s, this.p.ctx.options.maxParallelTasks);
    return {
      isolation: s.isolation,
      ...(note !== undefined ? { isolationNote: note } : {}),
      ...(s.integration && s.isolation === "worktree" ? { integration: integrationView(s.integration) } : {}),
      ...verificationStatus(s),
    };
  }

  /** Guarantee 10: a paused, failed or ownerless run explains its cause and remedy in plain words. */
  recovery(): { cause: string; resumable: boolean; remediation: string } | undefined {
    const s = this.p.model.state;
    if (this.p.health.invalid !== undefined && !TerminalPhases.includes(s.phase)) {
      return {
        cause: `The stored state of this product is not whole (guarantee 15): ${this.p.health.invalid}`,
        resumable: false,
        remediation: "Restore the state store from a backup, or delete the product; it can still be read and listed.",
      };
    }
    if (this.p.health.lost > 0 && !TerminalPhases.includes(s.phase)) {
      return {
        cause: `${this.p.health.lost} stored ${this.p.health.lost === 1 ? "event" : "events"} of this product failed validation or ${
          this.p.health.lost === 1 ? "is" : "are"
        } missing (guarantee 4); its state cannot be trusted to run.`,
        resumable: false,
        remediation: "Restore the state store from a backup, or delete the product; it can still be read and listed.",
      };
    }
    if (s.phase === "paused" || s.phase === "failed") {
      return (
        s.recovery ?? {
          cause: s.phase === "paused" ? "The product is paused." : "The product failed.",
          resumable: s.phase === "paused",
          remediation: s.phase === "paused" ? "Call product.resume to continue." : "Replay a failed task or roll back.",
        }
      );
    }
    if (s.phase === "executing" && !this.p.run.driving) {
      return {
        cause: "No process is driving this product (the server that ran it stopped).",
        resumable: true,
        remediation: "Call product.resume to continue; tasks that were running will run again.",
      };
    }
    const waiting = s.tasks.find((t) => t.status === "waiting");
    if (s.phase === "executing" && waiting) {
      return {
        cause: `Task ${waiting.taskId} is waiting for an answer: ${waiting.question ?? "(no question given)"}`,
        resumable: true,
        remediation: "Answer with product.message; the task will then run again.",
      };
    }
    if (
      s.phase === "planning" &&
      this.p.health.loadedFromStore &&
      !this.p.leader.planningStarted &&
      !s.plan &&
      !s.pendingAsk &&
      !s.planError
    ) {
      return {
        cause: "Planning did not finish: the server that ran the leader's turn stopped.",
        resumable: true,
        remediation: 'Send product.message (e.g. "plan again") to ask the leader to plan.',
      };
    }
    if (s.phase === "planning" && s.planError) {
      return {
        cause: s.planError,
        resumable: true,
        remediation: "Send product.message to ask the leader to plan again.",
      };
    }
    return undefined;
  }
}

/** What an answer version is made of (status.ts `inspectVersioned`). */
interface VersionParts {
  epoch: number;
  mark: string;
  seq: number;
  dropped: number;
  lost: number;
  invalid: string | undefined;
  planningStarted: boolean;
  loadedFromStore: boolean;
  driving: boolean;
  running: number;
}

/** The version text of `parts` for the product status object numbered `instance`: equal parts, equal texts. */
function versionText(instance: number, parts: VersionParts): string {
  const flags = `${parts.planningStarted ? 1 : 0}${parts.loadedFromStore ? 1 : 0}${parts.driving ? 1 : 0}`;
  return `${instance}:${parts.epoch}:${parts.mark}:${parts.seq}:${parts.dropped}:${parts.lost}:${parts.invalid ?? ""}:${flags}${parts.running}`;
}
