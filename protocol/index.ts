/**
 * The protocol package: every wire schema, the method table and the error codes, re-exported from one place.
 *
 * Owns nothing itself. Must never add declarations; each lives in the module named for what it holds.
 */
export * from "./common.js";
export * from "./method-spec.js";
export * from "./errors.js";
export * from "./acp.js";
export * from "./product.js";
export * from "./workspace-remote.js";
export * from "./host.js";
export * from "./methods.js";
