import { expect, it } from "vitest";
import { describePostgres, dropSchema, emptySchema, freshSchema, openTestAuthority } from "../support/postgres.js";
import { runAuthorityConformance } from "./conformance.js";

// One PostgreSQL schema for this file on the test database (ACP_ORCHESTRATOR_TEST_PG), emptied before each test.
const schema = freshSchema();
describePostgres("postgres authority", () =>
  runAuthorityConformance({
    name: "postgres",
    create: async () => (await emptySchema(schema), openTestAuthority({ schema })),
    destroy: (authority) => authority.close(),
    afterAll: () => dropSchema(schema),
  }),
);

// listValues (issue 32: product.list and the recovery pass on 100,000 stored products read in one statement).
const valuesSchema = freshSchema();
describePostgres("postgres authority: listValues", () => {
  it("returns what list then get return, in id order, prefix matched literally", async () => {
    await emptySchema(valuesSchema);
    const authority = await openTestAuthority({ schema: valuesSchema });
    try {
      for (const id of ["b/2", "a_1", "a%", "b/1", "a_2", "c"]) await authority.put("p", "k", id, { id, n: [1] }, null);
      await authority.put("p", "k", "a_1", { id: "a_1", n: [2] }, 1);
      await authority.put("p", "other", "a_1", { other: true }, null);
      await authority.put("q", "k", "a_1", { q: true }, null);
      for (const prefix of ["", "a_", "a%", "b/", "zz"]) {
        const viaGet = await Promise.all(
          (await authority.list("p", "k", prefix)).map(async (info) => ({
            id: info.id,
            ...(await authority.get("p", "k", info.id)),
          })),
        );
        expect(await authority.listValues("p", "k", prefix)).toEqual(viaGet);
      }
      expect((await authority.listValues("p", "k", "a_")).map((r) => [r.id, r.value, r.revision])).toEqual([
        ["a_1", { id: "a_1", n: [2] }, 2],
        ["a_2", { id: "a_2", n: [1] }, 1],
      ]);
    } finally {
      await authority.close();
      await dropSchema(valuesSchema);
    }
  });
});

// As a server opens it (open-store.ts: `announce: fleetWatches`): unannounced appends and puts go through group
// commit (postgres-group-commit.ts), which must keep every rule the announced path keeps.
const quietSchema = freshSchema();
describePostgres("postgres authority, unannounced writes (group commit)", () =>
  runAuthorityConformance({
    name: "postgres-quiet",
    create: async () => (
      await emptySchema(quietSchema),
      openTestAuthority({ schema: quietSchema, announce: () => false })
    ),
    destroy: (authority) => authority.close(),
    afterAll: () => dropSchema(quietSchema),
  }),
);
