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
