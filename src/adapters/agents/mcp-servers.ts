/**
 * MCP pass-through (issue 28): which MCP servers an agent's `session/new` gets. The product's servers (the ACP
 * session's `mcpServers`, stored without secrets, core/product/mcp-servers.ts) are completed with the secrets this
 * process holds in memory (`McpSecrets`), merged by `name` with the agent's own `mcpServers` from the config (the
 * agent's entry wins), and given only in the transports the agent advertises in `initialize`
 * (`agentCapabilities.mcpCapabilities`: stdio always, `http`/`sse` when true). Every server left out is named with
 * its reason, for the log and the task's activity.
 *
 * Secrets are never written anywhere: `McpSecrets` keeps them for the life of this process; a resumed run in another
 * process gives the servers that need none, and names the others ("lost their secrets") until the client opens the
 * product's session again (`session/load` carries the servers, and so the secrets, again).
 */
import type { McpServer } from "../../../protocol/acp.js";
import type { StoredMcpServer } from "../../core/product/mcp-servers.js";

/** A server left out of a `session/new`, and why (one plain sentence fragment). */
export interface SkippedMcpServer {
  name: string;
  reason: string;
}

/** A product's MCP servers with the secrets this process holds, and the names of those whose secrets it lacks. */
export interface ResolvedMcp {
  servers: McpServer[];
  lost: string[];
}

/** At most this many products' secrets are held; the oldest are forgotten first (guarantee 14). */
export const MAX_PRODUCTS_WITH_SECRETS = 1_000;

/**
 * The secrets of products' MCP servers, in this process's memory only: productId → the servers as the client gave
 * them. Never persisted, never logged.
 */
export class McpSecrets {
  private readonly byProduct = new Map<string, Map<string, McpServer>>();

  /** Keeps `servers` (as given, secrets included) for `productId`, replacing what was kept. Ignores an empty list. */
  remember(productId: string, servers: readonly McpServer[]): void {
    if (servers.length === 0) return;
    this.byProduct.delete(productId);
    this.byProduct.set(productId, new Map(servers.map((s) => [s.name, structuredClone(s)])));
    while (this.byProduct.size > MAX_PRODUCTS_WITH_SECRETS) {
      const oldest = this.byProduct.keys().next().value as string;
      this.byProduct.delete(oldest);
    }
  }

  /** Drops what is kept for `productId`. */
  forget(productId: string): void {
    this.byProduct.delete(productId);
  }

  /**
   * The product's stored servers as ACP `McpServer`s: with the kept secrets when this process holds them, as stored
   * when they need none; a server whose `env`/`headers` names secrets this process does not hold is left out and
   * named in `lost`.
   */
  resolve(productId: string, stored: readonly StoredMcpServer[]): ResolvedMcp {
    const kept = this.byProduct.get(productId);
    const servers: McpServer[] = [];
    const lost: string[] = [];
    for (const server of stored) {
      const full = kept?.get(server.name);
      if (full !== undefined) servers.push(structuredClone(full));
      else if (secretNames(server).length > 0) lost.push(server.name);
      else servers.push(asMcpServer(server));
    }
    return { servers, lost };
  }
}

/** The names of the secrets a stored server needs (its env variables or headers). */
function secretNames(server: StoredMcpServer): string[] {
  return ("type" in server ? server.headers : server.env).map((s) => s.name);
}

/** A stored server that needs no secret, as ACP's shape. */
function asMcpServer(server: StoredMcpServer): McpServer {
  if ("type" in server) return { type: server.type, name: server.name, url: server.url, headers: [] };
  return { name: server.name, command: server.command, args: [...server.args], env: [] };
}

/** The transport of a server: `stdio` (no `type`), `http` or `sse`. */
function transportOf(server: McpServer): string {
  const type = (server as { type?: unknown }).type;
  return typeof type === "string" ? type : "stdio";
}

/**
 * The servers one agent's `session/new` gets: `session` (the product's, resolved) merged by name with `agent` (the
 * config's for this agent, which wins), then only those whose transport the agent advertises (`capabilities`, ACP
 * `mcpCapabilities`; stdio is always supported). Pure.
 */
export function mcpServersFor(
  session: readonly McpServer[],
  agent: readonly McpServer[] | undefined,
  capabilities: { http?: boolean | null; sse?: boolean | null } | null | undefined,
): { servers: McpServer[]; skipped: SkippedMcpServer[] } {
  const merged = new Map<string, McpServer>();
  for (const server of [...session, ...(agent ?? [])]) merged.set(server.name, server);
  const servers: McpServer[] = [];
  const skipped: SkippedMcpServer[] = [];
  for (const server of merged.values()) {
    const transport = transportOf(server);
    const supported =
      transport === "stdio" ||
      (transport === "http" && capabilities?.http === true) ||
      (transport === "sse" && capabilities?.sse === true);
    if (supported) servers.push(server);
    else skipped.push({ name: server.name, reason: `the agent does not advertise the ${transport} transport` });
  }
  return { servers, skipped };
}

/** "MCP server "x" not given to the agent: <reason>" for each left-out server, lost secrets first. Pure. */
export function skippedMcpLines(lost: readonly string[], skipped: readonly SkippedMcpServer[]): string[] {
  return [
    ...lost.map(
      (name) =>
        `MCP server "${name}" not given to the agent: its secrets (env values or headers) are not kept across a ` +
        `restart; open the product's ACP session again (session/load) to give them back`,
    ),
    ...skipped.map((s) => `MCP server "${s.name}" not given to the agent: ${s.reason}`),
  ];
}
