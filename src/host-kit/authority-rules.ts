/**
 * The run-state authority conformance rules (DESIGN.md, Persistence backends; PROTOCOL.md section 7): one list of
 * rules that every `RunStateAuthority` backend must pass, framework-free so that the same rules run under vitest
 * (test/authority/conformance.ts, one spec file per backend) and in `acp-orchestrator check-host` against a host
 * author's own `runState/*` process (check-host.ts).
 *
 * Each rule is one method, one title in plain words, and one body that gets a fresh authority (under vitest) or one
 * shared with other rules (check-host: every rule then works in its own project ids, `P` and `Q`).
 *
 * Contract details these rules pin down beyond the docstrings of `src/core/ports.ts`:
 * - revisions start at 1 and grow by 1 per put; a record recreated after a delete starts again at 1;
 * - a conflict on an existing record carries `details.revision` = the current revision;
 * - `delete` of a missing record is `false`, whatever `expectedRevision` says;
 * - `list` is ordered by Unicode code point (UTF-8 byte order) and `prefix` is literal (`%`, `_` are not wildcards);
 * - `appendEvents` with no events checks `expectedSeq` and returns it;
 * - `listProjects` lists projects holding at least one record, sorted, without duplicates;
 * - `readEvents` with `limit` returns the first `limit` events (fewer only at the end of the stream);
 * - `deleteStream` restarts a stream's numbering; `pruneEvents` keeps it and never deletes the last event;
 * - invalid arguments (empty ids, revision 0, negative sequence numbers, non-object values) are `AuthorityFailure`;
 * - after `close`, every call fails with `AuthorityFailure`.
 *
 * The rules live in rules/, one file per group of methods (records, record listing, streams, maintenance); this file
 * assembles them in method order. None of them may depend on a particular backend or on a test framework.
 */
import { maintenanceRules } from "./rules/maintenance-rules.js";
import { recordListingRules } from "./rules/record-listing-rules.js";
import { recordRules } from "./rules/record-rules.js";
import { streamRules } from "./rules/stream-rules.js";
import type { AuthorityRule, DefineRule, RuleProjects } from "./rules/support.js";

export type { AuthorityRule, RuleProjects } from "./rules/support.js";

/** Every rule, in method order, writing to the project ids `projects` gives. */
export function authorityRules(projects: RuleProjects = { P: "project-a", Q: "project-b" }): AuthorityRule[] {
  const rules: AuthorityRule[] = [];
  const test: DefineRule = (method, title, run) => {
    rules.push({ method, title, run });
  };
  recordRules(test, projects);
  recordListingRules(test, projects);
  streamRules(test, projects);
  maintenanceRules(test, projects);
  return rules;
}
