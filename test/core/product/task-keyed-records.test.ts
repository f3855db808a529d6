/**
 * Snapshots and `restored` events keep maps keyed by task id (`inputHashes`, `interruptedAttempts`). Every valid task
 * id must read back as an ordinary key: zod 4's record refused a snapshot holding the key `constructor` (the product
 * could no longer load once compaction pruned the events it covers) and dropped the key `__proto__`.
 */
import { describe, expect, it } from "vitest";
import { ProductEvent, ProductStateSchema } from "../../../src/core/product/records.js";

const HASH = "ti1:0123456789abcdef";

describe("maps keyed by task id in stored records", () => {
  it("read `constructor`, `__proto__` and `toString` back as ordinary task ids", () => {
    const text = `{"constructor":"${HASH}","__proto__":"${HASH}","toString":"${HASH}","t1":"${HASH}"}`;
    const read = ProductStateSchema.shape.inputHashes.parse(JSON.parse(text)) as Record<string, string>;
    expect(Object.keys(read).sort()).toEqual(["__proto__", "constructor", "t1", "toString"]);
    expect(read.constructor).toBe(HASH);
    expect(JSON.stringify(read)).toBe(text);
    const counts = ProductStateSchema.shape.interruptedAttempts.parse(JSON.parse(`{"constructor":2,"__proto__":1}`));
    expect(JSON.stringify(counts)).toBe(`{"constructor":2,"__proto__":1}`);
  });

  it("still refuses a key that is not a task id and a value of the wrong kind", () => {
    expect(ProductStateSchema.shape.inputHashes.safeParse({ "bad\u0001id": HASH }).success).toBe(false);
    expect(ProductStateSchema.shape.inputHashes.safeParse({ "": HASH }).success).toBe(false);
    expect(ProductStateSchema.shape.inputHashes.safeParse({ t1: "" }).success).toBe(false);
    expect(ProductStateSchema.shape.interruptedAttempts.safeParse({ t1: -1 }).success).toBe(false);
    expect(ProductStateSchema.shape.inputHashes.safeParse(["t1"]).success).toBe(false);
  });

  it("reads a restored event whose hashes name a task `constructor`", () => {
    const parsed = ProductEvent.safeParse({
      v: 1,
      type: "restored",
      at: "2030-01-01T00:00:00.000Z",
      checkpointId: "ckp_1",
      tasks: [],
      inputHashes: JSON.parse(`{"constructor":"${HASH}"}`),
    });
    expect(parsed.error?.issues).toBeUndefined();
  });
});
