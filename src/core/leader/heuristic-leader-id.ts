/**
 * The leader id that names the built-in heuristic leader (heuristic-leader.ts; an ACP session's `leader` config
 * option, PROTOCOL.md section 4): a leader resolver gives the heuristic leader for it even when a default leader agent
 * is configured. A module of its own so that naming the leader does not load it (issue 34, cold start: the heuristic
 * leader's modules build a dozen Unicode-aware regular expressions when they load).
 */
export const HEURISTIC_LEADER_ID = "heuristic";
