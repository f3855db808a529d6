// Default state file location and default project id (src/adapters/persistence/state-path.ts).
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { STATE_PATH_ENV, defaultProjectId, defaultStatePath } from "../../../src/adapters/persistence/state-path.js";

describe("defaultStatePath", () => {
  it(`uses $${STATE_PATH_ENV} first`, () => {
    expect(
      defaultStatePath({ [STATE_PATH_ENV]: "/srv/acp/state.db", XDG_STATE_HOME: "/xdg" }, "linux", "/home/u"),
    ).toBe("/srv/acp/state.db");
  });

  it(`resolves a relative $${STATE_PATH_ENV} against the current directory`, () => {
    expect(defaultStatePath({ [STATE_PATH_ENV]: "state/x.db" }, "linux", "/home/u")).toBe(resolve("state/x.db"));
  });

  it(`ignores an empty $${STATE_PATH_ENV}`, () => {
    expect(defaultStatePath({ [STATE_PATH_ENV]: "" }, "linux", "/home/u")).toBe(
      "/home/u/.local/state/acp-orchestrator/state.db",
    );
  });

  it("uses $XDG_STATE_HOME when it is absolute", () => {
    expect(defaultStatePath({ XDG_STATE_HOME: "/xdg/state" }, "linux", "/home/u")).toBe(
      "/xdg/state/acp-orchestrator/state.db",
    );
  });

  it("ignores a relative $XDG_STATE_HOME, as the XDG spec says", () => {
    expect(defaultStatePath({ XDG_STATE_HOME: "rel/state" }, "linux", "/home/u")).toBe(
      "/home/u/.local/state/acp-orchestrator/state.db",
    );
  });

  it("defaults to ~/.local/state on Linux", () => {
    expect(defaultStatePath({}, "linux", "/home/u")).toBe("/home/u/.local/state/acp-orchestrator/state.db");
  });

  it("defaults to ~/Library/Application Support on macOS", () => {
    expect(defaultStatePath({}, "darwin", "/Users/u")).toBe(
      "/Users/u/Library/Application Support/acp-orchestrator/state.db",
    );
  });

  it("defaults to %LOCALAPPDATA% on Windows", () => {
    expect(defaultStatePath({ LOCALAPPDATA: "C:\\Users\\u\\AppData\\Local" }, "win32", "C:\\Users\\u")).toBe(
      "C:\\Users\\u\\AppData\\Local\\acp-orchestrator\\state.db",
    );
  });

  it("falls back to <home>\\AppData\\Local on Windows without %LOCALAPPDATA%", () => {
    expect(defaultStatePath({}, "win32", "C:\\Users\\u")).toBe(
      "C:\\Users\\u\\AppData\\Local\\acp-orchestrator\\state.db",
    );
  });

  it("reads the real environment by default and returns an absolute path", () => {
    expect(defaultStatePath()).toBe(resolve(defaultStatePath()));
  });
});

describe("defaultProjectId", () => {
  it("is p_ followed by 16 hex digits", () => {
    expect(defaultProjectId("/work/main", "linux")).toMatch(/^p_[0-9a-f]{16}$/);
  });

  it("never changes for a given path (stored projects depend on it)", () => {
    expect(defaultProjectId("/work/main", "linux")).toBe("p_f2af6c097ab83376");
  });

  it("ignores trailing separators and dot segments", () => {
    expect(defaultProjectId("/work/other/../main/./", "linux")).toBe(defaultProjectId("/work/main", "linux"));
  });

  it("differs between directories", () => {
    expect(defaultProjectId("/work/main", "linux")).not.toBe(defaultProjectId("/work/main2", "linux"));
  });

  it("resolves a relative path against the current directory", () => {
    expect(defaultProjectId(".", "linux")).toBe(defaultProjectId(process.cwd(), "linux"));
  });

  it("ignores case on Windows", () => {
    expect(defaultProjectId("C:\\Users\\Me\\Proj", "win32")).toBe("p_c798652c0c5c2beb");
  });
});
