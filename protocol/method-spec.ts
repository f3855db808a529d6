/**
 * The shape of one declared method or notification (STYLE.md: one method, one declaration).
 *
 * Handler registration, TypeScript types, params validation, the `initialize` method list and the generated
 * reference (`protocol/METHODS.md`, `protocol/schema.json`) all come from these declarations.
 */
import type { z } from "zod";

/** A request the server serves (client → server). */
export interface MethodSpec<P extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  /** Bare wire name, e.g. `product.plan` or `session/new`. */
  readonly method: string;
  /** True for extension methods, which are also served with a leading `_` (PROTOCOL.md section 2). */
  readonly extension: boolean;
  readonly params: P;
  readonly result: R;
  /** One sentence for the generated reference. */
  readonly summary: string;
  /** Phases in which the method is allowed, for the reference (enforced by the core). */
  readonly allowedIn?: readonly string[];
}

/** A notification (either direction) or a server → client request. */
export interface NotificationSpec<P extends z.ZodType = z.ZodType> {
  readonly method: string;
  readonly extension: boolean;
  readonly params: P;
  readonly summary: string;
}

/** Declares a method with its types inferred. */
export function defineMethod<P extends z.ZodType, R extends z.ZodType>(spec: MethodSpec<P, R>): MethodSpec<P, R> {
  return spec;
}

/** Declares a notification with its types inferred. */
export function defineNotification<P extends z.ZodType>(spec: NotificationSpec<P>): NotificationSpec<P> {
  return spec;
}
