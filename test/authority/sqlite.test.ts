import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SqliteAuthority } from "../../src/adapters/persistence/sqlite-authority.js";
import { runAuthorityConformance } from "./conformance.js";

// A fresh database file in its own temporary directory per test, removed with its WAL files afterwards.
runAuthorityConformance({
  name: "sqlite",
  create: async () => SqliteAuthority.open(join(mkdtempSync(join(tmpdir(), "acp-authority-")), "state.db")),
  destroy: async (authority) => {
    await authority.close();
    rmSync(dirname(authority.path), { recursive: true, force: true });
  },
});
