/**
 * The budgets of one product's run (guarantee 9, DESIGN.md; PROTOCOL.md `product.budgetUpdate`,
 * `product.budgetWarning`, `product.budgetExceeded`): records the usage workers report, announces the usage so far,
 * and asks `decide` whether a limit warns or trips (a trip pauses the product, never fails it). Part of the
 * execution loop (execution.ts), which calls it after every wave with results and whenever a worker reports usage.
 *
 * This file must never import I/O.
 */
import type { Recovery, StopReason } from "./decide.js";
import { decide } from "./decide.js";
import type { ProductParts } from "./parts.js";

/** What the budget needs of the execution loop: whether it drives the run, and its pause from inside. */
export interface BudgetLoop {
  readonly driving: boolean;
  pauseInside(recovery: Recovery, reason: StopReason): Promise<void>;
}

export class BudgetWatch {
  constructor(
    private readonly p: ProductParts,
    private readonly loop: BudgetLoop,
  ) {}

  /** Records usage a worker reported (a `usage` event), announces it and checks the budget. Never throws. */
  recordUsage(taskId: string, inputTokens: number, outputTokens: number): void {
    const p = this.p;
    const clean = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
    p.sections
      .run(async () => {
        await p.journal.commit([
          {
            type: "usage",
            taskId,
            inputTokens: clean(inputTokens),
            outputTokens: clean(outputTokens),
            estimated: false,
          },
        ]);
        this.announce();
        if (this.loop.driving && (await this.check())) p.pool.resolveIdle();
      })
      .catch(() => undefined);
  }

  /** Sends `product.budgetUpdate` with the usage and elapsed time so far. */
  announce(): void {
    const s = this.p.model.state;
    this.p.ctx.notifier.notify("product.budgetUpdate", {
      productId: s.productId,
      inputTokens: s.usage.inputTokens,
      outputTokens: s.usage.outputTokens,
      elapsedMs: this.p.timers.liveElapsedMs(),
      ...(s.budget.maxTotalTokens !== undefined ? { maxTotalTokens: s.budget.maxTotalTokens } : {}),
    });
  }

  /**
   * Budget check (guarantee 9, decide.ts): the one warning is recorded and sent; on exceed the product pauses (not
   * fails) and the client is told which limit tripped. Returns true when the product was paused. Inside `exclusive`.
   */
  async check(): Promise<boolean> {
    const p = this.p;
    const s = p.model.state;
    const decision = decide(p.model, {
      kind: "budget",
      elapsedMs: p.timers.liveElapsedMs(),
      warningRatio: p.ctx.options.budgetWarningRatio,
    });
    if (decision.events.length > 0) await p.journal.commit(decision.events);
    const used = s.usage.inputTokens + s.usage.outputTokens;
    const maxTokens = s.budget.maxTotalTokens;
    const base = {
      productId: s.productId,
      usedTokens: used,
      ...(maxTokens !== undefined ? { maxTotalTokens: maxTokens } : {}),
    };
    let paused = false;
    for (const effect of decision.effects) {
      if (effect.kind === "pause") {
        await this.loop.pauseInside(effect.recovery, "pause");
        paused = true;
      } else if (effect.kind === "notify") p.ctx.notifier.notify(effect.method, { ...base, reason: effect.reason });
    }
    return paused;
  }
}
