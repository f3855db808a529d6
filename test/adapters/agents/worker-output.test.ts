/**
 * A task attempt's output buffer (issue 16, memory): tens of thousands of small chunks are kept as a few flat blocks,
 * never past the bound, and read back as the exact concatenation.
 */
import { describe, expect, it } from "vitest";
import { OutputBuffer } from "../../../src/adapters/agents/worker-output.js";

describe("OutputBuffer", () => {
  it("reads back every chunk in order, across many blocks and repeated reads", () => {
    const buffer = new OutputBuffer(1_000_000);
    let expected = "";
    for (let i = 0; i < 5_000; i += 1) {
      buffer.append(`chunk ${i}\n`);
      expected += `chunk ${i}\n`;
      if (i === 1_234) expect(buffer.text).toBe(expected);
    }
    expect(buffer.length).toBe(expected.length);
    expect(buffer.text).toBe(expected);
    expect(buffer.text).toBe(expected);
  });

  it("keeps at most the bound, cutting the chunk that crosses it", () => {
    const buffer = new OutputBuffer(10);
    buffer.append("");
    buffer.append("abcdef");
    buffer.append("ghijkl");
    buffer.append("mno");
    expect(buffer.text).toBe("abcdefghij");
    expect(buffer.length).toBe(10);
    expect(new OutputBuffer(5).text).toBe("");
  });
});
