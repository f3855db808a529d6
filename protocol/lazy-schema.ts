/**
 * Schemas built on first use (issue 16, cold start). Every wire and record schema of the project is declared at the
 * top level of its module, as one expression; built eagerly, those declarations cost most of the server's start-up
 * (each zod 4 schema instance carries about 50 method closures, and the server answers `initialize` having validated
 * one params object). `lazySchema(() => z.object(…))` returns a stand-in that builds the schema the first time
 * anything looks at it, then forwards everything to it.
 *
 * Owns the stand-in only. Must never change what a schema accepts: the stand-in is transparent to parsing, to
 * `instanceof`, to composition (`.optional()`, `.extend()`, a shape holding it) and to JSON Schema generation. It must
 * never import anything but zod.
 */
import * as z from "zod";

// zod's English messages are the ones the wire carries (the issues of a -32602 answer). zod sets them when its
// entry module loads, but declares itself free of side effects, so a bundler (scripts/bundle.ts) drops that call:
// set them here, where every schema of the project is made.
z.config(z.locales.en());

/** Stand-ins not built yet, by stand-in; a stand-in leaves this map when it builds its schema. */
const unbuilt = new WeakMap<object, string | undefined>();

/** Every stand-in made, so that `isBuilt` can tell a stand-in from a plain schema. */
const standIns = new WeakSet<object>();

/**
 * Names (from `lazySchema`'s `name`) of the schemas built so far, in build order; for tests and profiling. Also
 * reachable as `globalThis[Symbol.for("acp-orchestrator.builtSchemas")]`, so that a test can read it from a module
 * preloaded into the built server (test/e2e/start-up-modules.test.ts), whose bundle has its own copy of this module.
 */
const builtNames: string[] = [];
(globalThis as Record<symbol, unknown>)[Symbol.for("acp-orchestrator.builtSchemas")] = builtNames;

/**
 * The zod methods that wrap their receiver in a new schema (zod's `inst.optional = () => optional(inst)` and the
 * like). Called through a stand-in they wrap the stand-in itself, not the schema behind it, so that a schema is the
 * same object wherever it is referenced (the generated reference finds its named shapes by identity).
 */
function wrapperMethod(standIn: z.ZodType, key: PropertyKey): ((...args: never[]) => unknown) | undefined {
  switch (key) {
    case "optional":
      return () => z.optional(standIn);
    case "nullable":
      return () => z.nullable(standIn);
    case "nullish":
      return () => z.optional(z.nullable(standIn));
    case "array":
      return () => z.array(standIn);
    case "or":
      return (other: z.ZodType) => z.union([standIn, other]);
    case "and":
      return (other: z.ZodType) => z.intersection(standIn, other);
    case "readonly":
      return () => z.readonly(standIn);
    case "brand":
      return () => standIn;
    case "register":
      return (registry: z.core.$ZodRegistry<never>, meta: never) => {
        registry.add(standIn, meta);
        return standIn;
      };
    default:
      return undefined;
  }
}

/**
 * A schema that is built by `build` the first time it is used (parsed with, composed, inspected), then behaves as
 * that schema in every respect. `build` runs at most once; it may refer to other lazy schemas, which are then built
 * when it runs. Costs nothing until first use beyond one small object.
 *
 * `name` only labels the schema in `builtSchemaNames()`. Does NOT catch errors of `build`: they surface at first
 * use, every time (a declaration error is a bug, and the module's tests build every schema).
 */
export function lazySchema<T extends z.ZodType>(build: () => T, name?: string): T {
  let schema: T | undefined;
  const real = (): T => {
    if (schema === undefined) {
      schema = build();
      unbuilt.delete(standIn);
      builtNames.push(name ?? "?");
    }
    return schema;
  };
  const standIn: T = new Proxy({} as T, {
    // `_zod` first: parsing reads it on every nested schema, through this trap (issue 16, request path).
    get: (_target, key) => (key === "_zod" ? real()._zod : (wrapperMethod(standIn, key) ?? Reflect.get(real(), key))),
    set: (_target, key, value) => Reflect.set(real(), key, value),
    has: (_target, key) => Reflect.has(real(), key),
    ownKeys: () => Reflect.ownKeys(real()),
    getOwnPropertyDescriptor: (_target, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(real(), key);
      // A proxy may not report a property as non-configurable when its target lacks it.
      return descriptor === undefined ? undefined : { ...descriptor, configurable: true };
    },
    defineProperty: (_target, key, descriptor) => Reflect.defineProperty(real(), key, descriptor),
    deleteProperty: (_target, key) => Reflect.deleteProperty(real(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(real()),
  });
  unbuilt.set(standIn, name);
  standIns.add(standIn);
  return standIn;
}

/**
 * False while `schema` is a stand-in of `lazySchema` that has not built its schema yet; true once it has, and for
 * any schema that is not a stand-in. Does not build anything.
 */
export function isBuilt(schema: object): boolean {
  return !standIns.has(schema) || !unbuilt.has(schema);
}

/** The names of the lazy schemas built so far in this process, in build order (unnamed ones as `?`). */
export function builtSchemaNames(): readonly string[] {
  return builtNames;
}
