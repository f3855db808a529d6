/**
 * The run-state authority conformance suite under vitest (DESIGN.md, Persistence backends; STYLE.md, LangGraph's
 * checkpoint-validation): registers every rule of src/host-kit/authority-rules.ts (the same rules that
 * `acp-orchestrator check-host` runs against a host's process) as one test, grouped by method.
 *
 * A backend's spec file calls `runAuthorityConformance` with an initializer (`name`, `create`, `destroy`, optional
 * `beforeAll`/`afterAll`, optional `deviations`). Each test gets a fresh authority from `create` and hands it to
 * `destroy` afterwards (also after the test closed it).
 *
 * A known deviation is declared in `deviations` under the key `"<method>: <rule title>"` with a reason; that test then
 * asserts the rule fails on the backend (a strict expected failure) and its title says "(deviation: reason)". A deviation naming no rule fails the suite.
 * This file must never depend on a particular backend.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RunStateAuthority } from "../../src/core/ports.js";
import { authorityRules } from "../../src/host-kit/authority-rules.js";

/** How a backend plugs into the suite. */
export interface AuthorityInitializer<A extends RunStateAuthority = RunStateAuthority> {
  /** Backend name shown in the test titles. */
  name: string;
  /** A fresh, empty authority for one test. */
  create(): Promise<A>;
  /** Releases one authority and whatever `create` made for it. Called even when the test closed it already. */
  destroy(authority: A): Promise<void>;
  beforeAll?(): Promise<void>;
  afterAll?(): Promise<void>;
  /** Known deviations: `"<method>: <rule title>"` → reason. Each one turns exactly that test into "fails as declared". */
  deviations?: Record<string, string>;
}

/** Registers the conformance suite for one backend. Call it at the top level of a `*.test.ts` file. */
export function runAuthorityConformance<A extends RunStateAuthority>(initializer: AuthorityInitializer<A>): void {
  const deviations = initializer.deviations ?? {};
  const rules = authorityRules();
  const registered = new Set(rules.map((r) => `${r.method}: ${r.title}`));
  let current: A | undefined;

  describe(`RunStateAuthority conformance: ${initializer.name}`, () => {
    if (initializer.beforeAll) beforeAll(() => initializer.beforeAll?.());
    if (initializer.afterAll) afterAll(() => initializer.afterAll?.());
    beforeEach(async () => {
      current = await initializer.create();
    });
    afterEach(async () => {
      const done = current;
      current = undefined;
      if (done) await initializer.destroy(done);
    });

    for (const method of [...new Set(rules.map((r) => r.method))]) {
      describe(method, () => {
        for (const rule of rules.filter((r) => r.method === method)) {
          const reason = deviations[`${rule.method}: ${rule.title}`];
          if (reason !== undefined) {
            // A strict expected failure: the deviation must still hold, so a backend that starts to meet the rule
            // fails here until its deviation is removed.
            it(`${rule.title} fails as declared (deviation: ${reason})`, async () => {
              if (!current) throw new Error("no authority: create() has not run");
              const authority = current;
              await expect((async () => rule.run(authority))()).rejects.toThrow();
            });
            continue;
          }
          it(rule.title, async () => {
            if (!current) throw new Error("no authority: create() has not run");
            await rule.run(current);
          });
        }
      });
    }

    it("declares deviations only for rules that exist", () => {
      expect(Object.keys(deviations).filter((key) => !registered.has(key))).toEqual([]);
    });
  });
}
