/**
 * The MCP servers of a product as stored with it (issue 28, MCP pass-through): the ACP session's `mcpServers`
 * (ACP `McpServer` shapes) without their secrets. An `env` entry of a stdio server and a `headers` entry of an http or
 * sse server keep their `name` only; the values live in the memory of the server process that was given them
 * (adapters/agents/mcp-servers.ts, `McpSecrets`) and are given again by the client's `session/load`. A resumed run
 * therefore gives its agents the same servers, and names the ones whose secrets this process does not hold.
 *
 * Pure: schemas and one conversion; never sees a secret value after `storedMcpServers` returned.
 */
import * as z from "zod";
import { lazySchema } from "../../../protocol/lazy-schema.js";
import type { McpServer } from "../../../protocol/acp.js";

const Name = lazySchema(() => z.string().min(1).max(500), "McpName");
const SecretNames = lazySchema(() => z.array(z.object({ name: Name }).strict()).max(200), "McpSecretNames");

/** One stored MCP server: ACP's shape with `env`/`headers` reduced to names. */
export const StoredMcpServer = lazySchema(
  () =>
    z.union([
      z
        .object({
          type: z.enum(["http", "sse"]),
          name: Name,
          url: z.string().min(1).max(8_000),
          headers: SecretNames,
        })
        .strict(),
      z
        .object({
          name: Name,
          command: z.string().min(1).max(8_000),
          args: z.array(z.string().max(8_000)).max(500),
          env: SecretNames,
        })
        .strict(),
    ]),
  "StoredMcpServer",
);
export type StoredMcpServer = z.infer<typeof StoredMcpServer>;

/** The stored list: at most 100 servers, names unique (a later server of the same name replaced an earlier one). */
export const StoredMcpServers = lazySchema(() => z.array(StoredMcpServer).max(100), "StoredMcpServers");

/**
 * The servers as stored: secret values dropped, `_meta` and unknown fields dropped, one server per name (the last
 * one given wins). Pure.
 */
export function storedMcpServers(servers: readonly McpServer[]): StoredMcpServer[] {
  const byName = new Map<string, StoredMcpServer>();
  for (const raw of servers.slice(0, 100)) {
    const server = raw as {
      type?: unknown;
      name: string;
      url?: string;
      command?: string;
      args?: string[];
      env?: { name: string }[];
      headers?: { name: string }[];
    };
    if ((server.type === "http" || server.type === "sse") && server.url !== undefined) {
      byName.set(server.name, {
        type: server.type,
        name: server.name,
        url: server.url,
        headers: (server.headers ?? []).map((h) => ({ name: h.name })),
      });
    } else if (server.command !== undefined) {
      byName.set(server.name, {
        name: server.name,
        command: server.command,
        args: [...(server.args ?? [])],
        env: (server.env ?? []).map((e) => ({ name: e.name })),
      });
    }
  }
  return [...byName.values()];
}
