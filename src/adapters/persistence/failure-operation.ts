/**
 * Says whether a failed run-state call was a read or a write (PROTOCOL.md section 3: `-32013` data `{cause,
 * operation}`, and its message says which). Wraps any `RunStateAuthority`: an `AuthorityFailure` thrown by one of
 * its read methods is marked `read`, by any other method `write`, unless the backend marked it already.
 *
 * It changes nothing else: same results, same errors, same object identity of everything the backend returns, and
 * methods the port gains later are forwarded (and count as writes) without a change here.
 */
import { AuthorityFailure, type RunStateAuthority } from "../../core/ports.js";

/** The methods of the authority port that only read (guarantee 3). */
const READS: ReadonlySet<PropertyKey> = new Set(["get", "list", "readEvents", "listProjects"]);

/** Returns `authority` seen through a proxy that marks the operation of every `AuthorityFailure` it throws. */
export function withFailureOperations<A extends RunStateAuthority>(authority: A): A {
  return new Proxy(authority, {
    get(target, property) {
      // Read with the backend itself as `this`, so its getters may use private fields.
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function" || property === "close") return value;
      const operation = READS.has(property) ? "read" : "write";
      return (...args: unknown[]) => {
        const mark = (err: unknown): never => {
          if (err instanceof AuthorityFailure && err.operation === undefined) err.operation = operation;
          throw err;
        };
        try {
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result instanceof Promise ? result.catch(mark) : result;
        } catch (err) {
          return mark(err);
        }
      };
    },
  });
}
