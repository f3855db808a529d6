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
const READS: ReadonlySet<PropertyKey> = new Set([
  "get",
  "list",
  "listValues",
  "listAcrossProjects",
  "listByCreation",
  "listTexts",
  "listTextsByCreation",
  "readEvents",
  "listProjects",
]);

/** Returns `authority` seen through a proxy that marks the operation of every `AuthorityFailure` it throws. */
export function withFailureOperations<A extends RunStateAuthority>(authority: A): A {
  // The wrapper of each method, made once per function the backend returns for it (issue 16, request path: a
  // `changeMark` per `product.status` used to allocate a wrapper and its closures on every call).
  const wrappers = new Map<PropertyKey, { value: unknown; wrapper: (...args: unknown[]) => unknown }>();
  return new Proxy(authority, {
    get(target, property) {
      // Read with the backend itself as `this`, so its getters may use private fields.
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function" || property === "close") return value;
      const known = wrappers.get(property);
      if (known !== undefined && known.value === value) return known.wrapper;
      const operation = READS.has(property) ? "read" : "write";
      const wrapper = (...args: unknown[]) => {
        try {
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result instanceof Promise ? result.catch((err: unknown) => markOperation(err, operation)) : result;
        } catch (err) {
          return markOperation(err, operation);
        }
      };
      wrappers.set(property, { value, wrapper });
      return wrapper;
    },
  });
}

/** Rethrows `err`, marked with `operation` when it is an `AuthorityFailure` the backend did not mark. */
function markOperation(err: unknown, operation: "read" | "write"): never {
  if (err instanceof AuthorityFailure && err.operation === undefined) err.operation = operation;
  throw err;
}
