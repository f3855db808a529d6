import { MemoryAuthority } from "../../src/adapters/persistence/memory-authority.js";
import { runAuthorityConformance } from "./conformance.js";

runAuthorityConformance({
  name: "memory",
  create: async () => new MemoryAuthority(),
  destroy: (authority) => authority.close(),
});
