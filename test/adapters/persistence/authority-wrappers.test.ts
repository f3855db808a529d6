/**
 * The two wrappers every server puts around its run-state authority (failure-operation.ts, delegating-authority.ts):
 * what they forward, and that the functions they hand out are made once, not on every property read (issue 16,
 * request path: `product.status` reads `changeMark` through both on every request).
 */
import { describe, expect, it } from "vitest";
import { AuthorityFailure, type RunStateAuthority } from "../../../src/core/ports.js";
import { DelegatingAuthority } from "../../../src/adapters/persistence/delegating-authority.js";
import { withFailureOperations } from "../../../src/adapters/persistence/failure-operation.js";
import { MemoryAuthority } from "../../../src/adapters/persistence/memory-authority.js";
import { ReadOnlyAuthority } from "../../../src/adapters/persistence/read-only-authority.js";

/** A memory authority with a change mark the test moves by hand. */
function marked(): { authority: RunStateAuthority; move(): void } {
  const authority = new MemoryAuthority() as RunStateAuthority & { changeMark?: () => string };
  let mark = 0;
  authority.changeMark = () => `m${mark}`;
  return { authority, move: () => (mark += 1) };
}

describe("withFailureOperations", () => {
  it("hands out one wrapper per method while the backend's method stays the same, and a new one when it changes", async () => {
    const backend = new MemoryAuthority() as RunStateAuthority & { get: RunStateAuthority["get"] };
    const wrapped = withFailureOperations(backend);
    expect(wrapped.get).toBe(wrapped.get);
    expect(wrapped.put).not.toBe(wrapped.get);
    const failing: RunStateAuthority["get"] = () => Promise.reject(new AuthorityFailure("down"));
    backend.get = failing;
    const first = wrapped.get;
    expect(wrapped.get).toBe(first);
    await expect(first("p", "kind", "id")).rejects.toMatchObject({ operation: "read" });
    backend.put = () => {
      throw new AuthorityFailure("full");
    };
    expect(() => wrapped.put("p", "kind", "id", {}, null)).toThrow(expect.objectContaining({ operation: "write" }));
  });

  it("marks a failed listValues as a read (regression: it was marked a write)", async () => {
    const backend = new MemoryAuthority() as RunStateAuthority;
    backend.listValues = () => Promise.reject(new AuthorityFailure("down"));
    await expect(withFailureOperations(backend).listValues?.("p", "kind")).rejects.toMatchObject({ operation: "read" });
  });
});

describe("ReadOnlyAuthority listValues", () => {
  it("forwards to the backend's listValues (one read) rather than a get per record", async () => {
    const backend = new MemoryAuthority() as RunStateAuthority;
    await backend.put("p", "kind", "a", { n: 1 }, null);
    const listed = [{ id: "a", value: { n: 1 }, revision: 1, updatedAt: "t" }];
    backend.listValues = () => Promise.resolve(listed);
    backend.get = () => Promise.reject(new Error("get must not be called"));
    expect(await new ReadOnlyAuthority(backend).listValues("p", "kind")).toBe(listed);
  });
});

describe("DelegatingAuthority changeMark", () => {
  it("is one function and one text while the backend and its mark stay the same; a switch or a move changes them", () => {
    const a = marked();
    const b = marked();
    const delegating = new DelegatingAuthority(a.authority);
    const read = delegating.changeMark;
    expect(read).toBeDefined();
    expect(delegating.changeMark).toBe(read);
    expect(read?.()).toBe("0/m0");
    a.move();
    expect(read?.()).toBe("0/m1");
    delegating.use(b.authority);
    const afterSwitch = delegating.changeMark;
    expect(afterSwitch).not.toBe(read);
    expect(afterSwitch?.()).toBe("1/m0");
    b.move();
    expect(delegating.changeMark?.()).toBe("1/m1");
    delegating.use(new MemoryAuthority());
    expect(delegating.changeMark).toBeUndefined();
  });
});
