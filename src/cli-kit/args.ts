/**
 * Command-line option parsing for every command, on `node:util` `parseArgs` tokens with our own rules and messages:
 * a string option always takes the next argument as its value, even when it starts with "-" (`--goal "- Write a
 * README"`), except an option of the same command (`--goal --yes`: the value was left out; `--goal=--yes` gives it);
 * an unknown option, a missing value or a value given to a flag is a `UsageError` naming the option.
 *
 * Owns option syntax only. It must never read the environment or files; commands validate the values themselves.
 */
import { parseArgs } from "node:util";
import { UsageError } from "./errors.js";

/** One option of a command. */
export interface OptionSpec {
  readonly type: "string" | "boolean";
  /** A one-letter alias (`-h`). */
  readonly short?: string;
  /** String options only: the option may be given several times (values kept in order). */
  readonly multiple?: boolean;
}

export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

type ValueOf<S extends OptionSpec> = S["type"] extends "boolean"
  ? boolean
  : S["multiple"] extends true
    ? string[]
    : string;

/** The parsed options: each present option's value (booleans `true`, repeated strings as an array). */
export type OptionValues<S extends OptionSpecs> = { -readonly [K in keyof S]?: ValueOf<S[K]> };

export interface ParsedArgs<S extends OptionSpecs> {
  values: OptionValues<S>;
  /** Arguments that are not options, in order, before any `--`. */
  positionals: string[];
  /** Everything after the first `--` (undefined when there was none). */
  rest: string[] | undefined;
}

/**
 * Parses `argv` against `specs` for the command `command` (named in the errors).
 * Throws `UsageError` for an unknown option, a string option without a value (or whose next argument is one of the
 * command's own options, or `--help`/`-h`), a value given to a boolean option
 * (`--keep=yes`), or a non-repeatable option given twice with different values.
 */
export function parseCommandArgs<S extends OptionSpecs>(
  command: string,
  argv: readonly string[],
  specs: S,
): ParsedArgs<S> {
  const options: Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }> = {};
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = {
      type: spec.type,
      ...(spec.short ? { short: spec.short } : {}),
      ...(spec.multiple ? { multiple: true } : {}),
    };
  }
  // Not strict: parseArgs then takes the next argument as a string option's value whatever it starts with, and
  // leaves the checking (and the wording) to us.
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, unknown> = {};
  const positionals: string[] = [];
  let rest: string[] | undefined;
  for (const token of tokens) {
    if (token.kind === "option-terminator") {
      rest = argv.slice(token.index + 1);
      break;
    }
    if (token.kind === "positional") {
      positionals.push(token.value);
      continue;
    }
    const spec = specs[token.name];
    if (spec === undefined) {
      throw new UsageError(`"${command}" has no option ${token.rawName}.`, command);
    }
    if (spec.type === "boolean") {
      if (token.value !== undefined)
        throw new UsageError(`The option ${token.rawName} of "${command}" takes no value.`, command);
      values[token.name] = true;
      continue;
    }
    if (token.value === undefined) {
      throw new UsageError(`The option ${token.rawName} of "${command}" needs a value.`, command);
    }
    if (!token.inlineValue && isOptionOf(token.value, specs)) {
      // `run --goal --yes`: the user left the value out, so the next option would be taken as it (a new user's trial).
      throw new UsageError(
        `The option ${token.rawName} of "${command}" needs a value, not the option ${token.value} ` +
          `(write ${token.rawName}=${token.value} if that is the value).`,
        command,
      );
    }
    if (spec.multiple) {
      ((values[token.name] ??= []) as string[]).push(token.value);
    } else if (values[token.name] !== undefined && values[token.name] !== token.value) {
      throw new UsageError(`The option ${token.rawName} of "${command}" is given twice.`, command);
    } else {
      values[token.name] = token.value;
    }
  }
  return { values: values as OptionValues<S>, positionals, rest };
}

/**
 * Whether `arg` is an option `specs` knows, or `--help`/`-h` (which every command takes): `--name`, `--name=…`, or a
 * short `-x` alone. A value such as `- Write a README`, `-5` or `-yarn` is not.
 */
function isOptionOf(arg: string, specs: OptionSpecs): boolean {
  if (arg === "--help" || arg === "-h") return true;
  if (arg.startsWith("--")) return Object.hasOwn(specs, arg.slice(2).split("=")[0] ?? "");
  return /^-[A-Za-z]$/u.test(arg) && Object.values(specs).some((spec) => spec.short === arg[1]);
}

/** Throws `UsageError` unless there are between `min` and `max` positionals; `what` names them for the message. */
export function expectPositionals(
  command: string,
  positionals: readonly string[],
  min: number,
  max: number,
  what: string,
): void {
  if (positionals.length < min) throw new UsageError(`"${command}" needs ${what}.`, command);
  if (positionals.length > max) {
    throw new UsageError(`"${command}" got an unexpected argument "${positionals[max] ?? ""}".`, command);
  }
}
