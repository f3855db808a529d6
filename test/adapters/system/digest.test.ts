// The platform SHA-256 the server passes to the core (Digest port, guarantee 7) must give exactly the digests of the
// core's pure implementation: task input hashes and plan fingerprints recorded by one are compared by the other (a
// product recorded by a process with either, or read by the operator views). Known answers from FIPS 180-4 pin both.
import { describe, expect, it } from "vitest";
import { nodeSha256Hex } from "../../../src/adapters/system/digest.js";
import { planHash, sha256Hex, taskInputHash } from "../../../src/core/product/fingerprint.js";
import type { Plan } from "../../../protocol/common.js";

/** A one-task plan, valid for its schema. */
function aPlan(): Plan {
  return {
    productId: "prd_1",
    version: 1,
    name: "Hash",
    summary: "One task.",
    instances: [{ instanceId: "i1", agentId: "builtin-worker", role: "worker" }],
    tasks: [{ taskId: "t1", title: "One", description: "Do one thing.", instanceId: "i1", dependsOn: [] }],
  };
}

const SAMPLES = [
  "",
  "abc",
  "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
  "é, ü, ß and 中文",
  "emoji 🚀 outside the BMP",
  "a lone surrogate \ud800 and a reversed pair \udc00\ud800",
  "x".repeat(55),
  "y".repeat(56),
  "z".repeat(64),
  "long ".repeat(40_000),
];

describe("nodeSha256Hex", () => {
  it("gives the FIPS 180-4 known answers", () => {
    expect(nodeSha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(nodeSha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  });

  it("gives the core's pure digests for every kind of text, lone surrogates and block edges included", () => {
    for (const text of SAMPLES) expect(nodeSha256Hex(text), JSON.stringify(text.slice(0, 40))).toBe(sha256Hex(text));
  });

  it("makes the same task input hash and plan fingerprint as the pure implementation", () => {
    const input = {
      title: "Write ✓",
      description: "with a \ud800 lone surrogate",
      instanceId: "i1",
      agentId: "builtin-worker",
      dependencyOutputs: [{ taskId: "t0", output: "done 🚀" }],
    };
    expect(taskInputHash(input, nodeSha256Hex)).toBe(taskInputHash(input));
    const plan = aPlan();
    expect(planHash(plan, "v1", nodeSha256Hex)).toBe(planHash(structuredClone(plan), "v1"));
  });
});

describe("planHash", () => {
  it("remembers a plan's fingerprint per prompt version, and a new plan object gets its own", () => {
    const plan = aPlan();
    const first = planHash(plan, "v1", nodeSha256Hex);
    expect(planHash(plan, "v1", nodeSha256Hex)).toBe(first);
    expect(planHash(plan, "v2", nodeSha256Hex)).not.toBe(first);
    const edited = { ...plan, version: 2 };
    expect(planHash(edited, "v1", nodeSha256Hex)).not.toBe(first);
    expect(planHash(undefined, "v1", nodeSha256Hex)).toBe(planHash(undefined, "v1"));
  });
});

describe("planHash with another digest", () => {
  it("does not answer a fingerprint remembered from another digest function", () => {
    const plan = aPlan();
    const real = planHash(plan, "v1", nodeSha256Hex);
    const fake = planHash(plan, "v1", () => "fake");
    expect(fake).toBe("pl1:fake");
    expect(planHash(plan, "v1", nodeSha256Hex)).toBe(real);
  });
});
