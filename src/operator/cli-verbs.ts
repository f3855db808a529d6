/**
 * The command line's words for the protocol's recovery and refusal texts (a new user's trial): `product.status`'s
 * `recovery` and the server's refusals name JSON-RPC methods ("Call product.resume to continue."), which is right on
 * the wire (PROTOCOL.md; guarantee 10) but tells a person at a terminal nothing. The CLI renders each such method as the
 * command that does it (`Run "acp-orchestrator resume prd_…" to continue.`); the texts on the wire never change.
 *
 * Pure functions of their arguments. Goal-run methods (`x/goal.*`) are left as they are: the command line has no verb
 * for them (docs/OPERATOR.md).
 */
import { isPostgresUrl, withoutPassword } from "../adapters/persistence/postgres-url.js";

/** The CLI verb (and its arguments after the product id) of each product method a recovery or refusal may name. */
const VERBS: Readonly<Record<string, string>> = {
  "product.resume": "resume ID",
  "product.pause": "pause ID",
  "product.cancel": "cancel ID",
  "product.checkpoint": "checkpoint ID",
  "product.rollback": "rollback ID",
  "product.replayTask": "retry ID TASK",
  "product.confirm": "confirm ID",
  "product.message": "message ID TEXT",
  // The command line has no mutate verb: the leader changes the DAG on a message (docs/OPERATOR.md).
  "product.mutate": "message ID TEXT",
  "product.delete": "delete ID",
  "product.status": "status ID",
};

/**
 * A method, optionally after the verb that calls it ("Call", "call", "send", "use") and before "with
 * additionalBudget"; `_product.*` (the ACP extension spelling) too.
 */
const METHOD =
  /(?:\b([Cc]all|[Ss]end|[Uu]se) )?\b_?(product\.(?:resume|pause|cancel|checkpoint|rollback|replayTask|confirm|message|mutate|delete|status))\b( with additionalBudget)?/gu;

/**
 * `text` with every product method it names replaced by the CLI command that does it for `productId`, quoted, with
 * `flags` (e.g. ` --state /x/state.db`, see `storeFlags`) after the verb's arguments: "Call product.resume to
 * continue." becomes `Run "acp-orchestrator resume prd_x" to continue.`; "… with product.replayTask" becomes
 * `… with "acp-orchestrator retry prd_x TASK"`; "product.resume with additionalBudget" names `--add-tokens N` (or
 * `--add-duration-ms N`). Text without a product method comes back unchanged.
 */
export function inCliWords(text: string, productId: string, flags = ""): string {
  return text.replace(METHOD, (_whole, verb: string | undefined, method: string, budget: string | undefined) => {
    const args = (VERBS[method] ?? method).replace("ID", productId);
    const command = `"acp-orchestrator ${args}${flags}${budget ? " --add-tokens N" : ""}"${budget ? " (or --add-duration-ms N)" : ""}`;
    if (verb === undefined) return command;
    return `${verb[0] === verb[0]?.toUpperCase() ? "Run" : "run"} ${command}`;
  });
}

/** ` --state VALUE` (shell-quoted when needed) for the commands `inCliWords` names, or "" when none was given. */
export function storeFlags(state: string | undefined): string {
  if (state === undefined) return "";
  return ` --state ${shellWord(printableState(state))}`;
}

/**
 * A `--state` value as a printed command shows it: a postgres:// URL without its password (postgres-url.ts
 * `withoutPassword`: printed commands reach terminals, logs and the dashboard's browser), a path as given.
 */
export function printableState(state: string): string {
  return isPostgresUrl(state) ? withoutPassword(state) : state;
}

/** `text` as one POSIX shell word: as is when it is plain, else single-quoted. */
export function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/u.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
