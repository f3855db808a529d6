/**
 * The goal run's hold on its phases' products (PROTOCOL.md section 6): launches a phase's product, continues one no
 * process drives (created but never confirmed, or executing without a driver after a restart), waits until it ends or
 * pauses, pauses it with the goal, resumes it with the goal's added budget, and tells a running phase from one whose
 * product is gone. Owns the set of products this instance launched or resumed (so a follower never resumes one a
 * second time) and the wake-up of the wait. Never records goal events (the goal run does); no I/O except through the
 * ProductService.
 */
import { TerminalPhases, type Budget, type Phase } from "../../../protocol/common.js";
import { isDomainError } from "../errors.js";
import type { DraftPlan, Logger } from "../ports.js";
import type { ProductOrchestrator } from "../product/orchestrator.js";
import type { ProductService } from "../product/service.js";
import type { PausedProduct } from "./decide.js";
import type { GoalBudget, GoalState } from "./records.js";
import { clip } from "./policy.js";

/** Product phases at which a follower stops waiting: the product ended or paused. */
const PRODUCT_SETTLED: readonly Phase[] = ["completed", "failed", "cancelled", "paused"];

/** Where a followed product stands once it settled. */
export type SettledAs = "ended" | "paused" | "running";

export class PhaseProducts {
  /** Products this instance launched or resumed, so a follower never resumes one a second time. */
  readonly #attached = new Set<string>();
  #wakeUp: (() => void) | null = null;

  constructor(
    private readonly products: ProductService,
    private readonly logger: Logger,
  ) {}

  /** Wakes a wait for the phase's product (called on the product's phase changes). */
  wake(): void {
    this.#wakeUp?.();
  }

  /** The product, or undefined when it is not found (deleted, or never created). Other errors are thrown. */
  async find(productId: string): Promise<ProductOrchestrator | undefined> {
    try {
      return await this.products.get(productId);
    } catch (err) {
      if (!isDomainError(err, "not_found")) throw err;
      return undefined;
    }
  }

  /** The product, or undefined on any error (status views, pause). Never throws. */
  peek(productId: string): Promise<ProductOrchestrator | undefined> {
    return this.products.get(productId).catch(() => undefined);
  }

  /** True when the product waits for someone here to continue it: never confirmed, or driven by no one. */
  needsContinuing(product: ProductOrchestrator, productId: string): boolean {
    return (
      product.phase === "awaiting_confirmation" ||
      (product.phase === "executing" && !product.isDriving && !this.#attached.has(productId))
    );
  }

  /** Continues the product (confirm, or an automatic resume); it counts as attached from now on. */
  async continue(product: ProductOrchestrator, productId: string): Promise<void> {
    this.#attached.add(productId);
    if (product.phase === "awaiting_confirmation") await this.products.confirm(productId, {});
    else await this.products.resume(productId, undefined, { automatic: true });
  }

  /** Launches the phase's product (its `phase_started` was recorded before) with the goal's remaining budget. */
  async launch(
    s: GoalState,
    launch: { productId: string; phaseIndex: number; plan: DraftPlan; message: string; budget?: Budget },
  ): Promise<void> {
    this.#attached.add(launch.productId);
    await this.products.launch(
      {
        goal: s.goal,
        cwd: s.cwd,
        projectId: s.projectId,
        ...(s.sessionId !== undefined ? { sessionId: s.sessionId } : {}),
        name: clip(launch.plan.name || `Phase ${launch.phaseIndex + 1}`, 500),
        ...(launch.budget ? { budget: launch.budget } : {}),
      },
      launch.plan,
      launch.message,
      launch.productId,
    );
  }

  /**
   * Resolves once the product ended or paused, or the goal run was interrupted (`run.signal()` aborted: pause, stop,
   * shutdown, fencing) or shut down (`run.closed()`).
   */
  async waitSettled(product: ProductOrchestrator, run: { signal(): AbortSignal; closed(): boolean }): Promise<void> {
    while (!PRODUCT_SETTLED.includes(product.phase) && !run.signal().aborted && !run.closed()) {
      const current = run.signal();
      await new Promise<void>((resolve) => {
        const done = (): void => {
          current.removeEventListener("abort", done);
          if (this.#wakeUp === done) this.#wakeUp = null;
          resolve();
        };
        this.#wakeUp = done;
        current.addEventListener("abort", done, { once: true });
        if (PRODUCT_SETTLED.includes(product.phase) || current.aborted) done();
      });
    }
  }

  /** Where a product stands after `waitSettled`: ended (to be assessed), paused, or still running (interrupted). */
  settledAs(product: ProductOrchestrator): SettledAs {
    if (product.phase === "paused") return "paused";
    return TerminalPhases.includes(product.phase) ? "ended" : "running";
  }

  /** How a paused product stood, for decide.ts's `productPaused`. */
  pausedState(product: ProductOrchestrator): PausedProduct {
    const st = product.model.state;
    return {
      usedTokens: st.usage.inputTokens + st.usage.outputTokens,
      elapsedMs: st.usage.elapsedMs,
      budget: st.budget,
      ...(st.recovery?.cause !== undefined ? { cause: st.recovery.cause } : {}),
      ...(st.recovery?.remediation !== undefined ? { remediation: st.recovery.remediation } : {}),
    };
  }

  /** Pauses the open phase's product when it executes (also one no process drives, after a restart). Never throws. */
  async pauseOpen(s: GoalState): Promise<void> {
    const productId = s.productId;
    if (productId === undefined) return;
    const product = await this.peek(productId);
    if (product?.phase !== "executing") return;
    await this.products.pause(productId).catch((err: unknown) => {
      this.logger.warn({ err, goalRunId: s.goalRunId, productId }, "could not pause the phase's product");
    });
  }

  /** True when a resumed goal must resume its open phase's product: paused, or executing without a driver. */
  needsResume(product: ProductOrchestrator): boolean {
    return product.phase === "paused" || (product.phase === "executing" && !product.isDriving);
  }

  /** Resumes the open phase's product with the goal's added token and time budget; it counts as attached. */
  async resume(productId: string, additionalBudget: GoalBudget | undefined): Promise<void> {
    const extra: Budget = {};
    if (additionalBudget?.maxTotalTokens !== undefined) extra.maxTotalTokens = additionalBudget.maxTotalTokens;
    if (additionalBudget?.maxDurationMs !== undefined) extra.maxDurationMs = additionalBudget.maxDurationMs;
    await this.products.resume(productId, Object.keys(extra).length > 0 ? extra : undefined);
    this.#attached.add(productId);
  }

  /** Tokens and milliseconds the goal spent so far including the open phase's product (for `resumed`). */
  spentWith(s: GoalState, product: ProductOrchestrator): { spentTokens: number; spentMs: number } {
    const usage = product.model.state.usage;
    return {
      spentTokens: s.usedTokens + usage.inputTokens + usage.outputTokens,
      spentMs: s.elapsedMs + usage.elapsedMs,
    };
  }
}
