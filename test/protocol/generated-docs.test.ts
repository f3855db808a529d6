/**
 * The generated protocol/schema.json and protocol/METHODS.md are not stale: they equal what
 * scripts/generate-protocol-docs.ts renders from the current schemas. When this fails, run `npm run build`
 * (or `npx tsx scripts/generate-protocol-docs.ts`) and commit the regenerated files.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GENERATED_FILES, renderProtocolDocs, repositoryRoot } from "../../scripts/generate-protocol-docs.js";
import { hostRequests, productNotifications, serverMethods } from "../../protocol/methods.js";

const rendered = renderProtocolDocs();
const committed = (key: keyof typeof GENERATED_FILES) =>
  readFileSync(join(repositoryRoot(), GENERATED_FILES[key]), "utf8");

describe("generated protocol docs", () => {
  it("protocol/schema.json is up to date", () => {
    expect(committed("schemaJson") === rendered.schemaJson, "protocol/schema.json is stale; run npm run build").toBe(
      true,
    );
  });

  it("protocol/METHODS.md is up to date", () => {
    expect(committed("methodsMd") === rendered.methodsMd, "protocol/METHODS.md is stale; run npm run build").toBe(true);
  });

  it("renders deterministically", () => {
    expect(renderProtocolDocs()).toEqual(rendered);
  });

  it("schema.json has a params and result definition per method and a definition per notification", () => {
    const defs = (JSON.parse(rendered.schemaJson) as { $defs: Record<string, unknown> }).$defs;
    const expected = [
      ...[...serverMethods, ...hostRequests].flatMap((m) => [`${m.method}.params`, `${m.method}.result`]),
      ...productNotifications.map((n) => `${n.method}.notification`),
      "session/update.notification",
      "session/cancel.notification",
    ];
    expect(expected.filter((id) => defs[id] === undefined)).toEqual([]);
  });

  it("params definitions of product methods reject unknown keys and require what the table requires", () => {
    const defs = (
      JSON.parse(rendered.schemaJson) as {
        $defs: Record<string, { required?: string[]; additionalProperties?: unknown }>;
      }
    ).$defs;
    expect(defs["product.plan.params"]?.required).toEqual(["goal", "cwd"]);
    expect(defs["product.plan.params"]?.additionalProperties).toBe(false);
  });

  it("METHODS.md documents every method under each spelling, and every error code", () => {
    for (const m of serverMethods) {
      expect(rendered.methodsMd).toContain(`### \`${m.method}\``);
      if (m.extension) expect(rendered.methodsMd).toContain(`\`_${m.method}\``);
    }
    for (const code of [
      -32700, -32600, -32601, -32602, -32603, -32002, -32010, -32011, -32012, -32013, -32014, -32016,
    ]) {
      expect(rendered.methodsMd).toContain(`| ${code} |`);
    }
  });
});
