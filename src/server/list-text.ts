/**
 * The bytes of an unpaged `product.list` answer (PROTOCOL.md section 5; issue 32: 100,000 stored products), written
 * from entries cut from the stored headers (core/product/header-entry.ts) without parsing or serialising them again,
 * into fixed-size buffers outside the JavaScript heap (no 22 MB string to join and encode again, no buffer grown and
 * copied, nothing the garbage collector copies), either from every entry at once (`listText`) or a batch at a time
 * as the store reads them in order (`streamedListText`: no entry outlives its batch). Pure: no I/O.
 */
import { ENTRY_START, type HeaderEntry } from "../core/product/header-entry.js";
import { isCut, type ListedProduct } from "../core/product/product-list.js";
import { escapeLineSeparators, JsonText } from "./json-text.js";

/** Most UTF-8 bytes one UTF-16 code unit takes (a surrogate pair takes 4 for 2). */
const MAX_BYTES_PER_UNIT = 3;
/** Size of each buffer of the answer: large enough that a write of the answer is a few system calls. */
const CHUNK_BYTES = 1 << 20;

type Entry = ListedProduct | HeaderEntry;

/**
 * `{"products":[…],"dropped":n}` from `products` as UTF-8, each entry cut from its stored header (`HeaderEntry`: `{`,
 * its two ranges of the stored text, `}`) or an object (`JSON.stringify`): the bytes `serializeJson` gives for the same
 * answer as objects. A cut entry holds no U+2028/U+2029 (header-entry.ts), so only an object's text is escaped.
 */
export function listText(products: readonly Entry[], dropped: number): JsonText {
  const list = new ListWriter(products.length * 256);
  list.entries(products);
  return list.end(dropped);
}

/**
 * The same answer from entries handed over a batch at a time: `read` calls its sink with each batch, in list order,
 * and resolves with `dropped`, or with `undefined` when it could not list (product-list.ts `streamProductEntries`):
 * then this resolves with `undefined` and what was written is discarded. Rejects with what `read` rejects with.
 */
export async function streamedListText(
  read: (sink: (entries: readonly Entry[]) => void) => Promise<{ dropped: number } | undefined>,
): Promise<JsonText | undefined> {
  const list = new ListWriter(CHUNK_BYTES);
  const done = await read((entries) => list.entries(entries));
  return done === undefined ? undefined : list.end(done.dropped);
}

/** Writes the answer's entries in order into an `Output`. */
class ListWriter {
  readonly #out: Output;
  #first = true;

  constructor(expected: number) {
    this.#out = new Output(expected);
    this.#out.write('{"products":[');
  }

  entries(products: readonly Entry[]): void {
    const out = this.#out;
    for (let i = 0; i < products.length; i++) {
      const entry = products[i] as Entry;
      if (!this.#first) out.byte(0x2c); // ,
      this.#first = false;
      if (isCut(entry)) {
        out.cut(entry);
      } else {
        // Serialised when the answer ends: an executing product's owner is set after the read (product-list.ts).
        out.defer(entry);
      }
    }
  }

  end(dropped: number): JsonText {
    this.#out.write(`],"dropped":${JSON.stringify(dropped)}}`);
    return JsonText.fromChunks(this.#out.chunks((entry) => escapeLineSeparators(JSON.stringify(entry))));
  }
}

/**
 * UTF-8 written into buffers of `CHUNK_BYTES` (the first as large as expected): room for the worst case of each text
 * is made before it is written, so none is cut short; a full buffer is kept as it is and a new one started, so
 * nothing written is ever copied again.
 */
class Output {
  readonly #done: (Buffer | ListedProduct)[] = [];
  #buffer: Buffer;
  #at = 0;

  constructor(expected: number) {
    this.#buffer = Buffer.allocUnsafeSlow(Math.max(1024, Math.min(expected, CHUNK_BYTES)));
  }

  write(text: string): void {
    this.#room(text.length * MAX_BYTES_PER_UNIT);
    this.#at += this.#buffer.write(text, this.#at, "utf8");
  }

  /**
   * A cut entry's JSON text (`{`, two ranges of its stored text, `}`: header-entry.ts). An ASCII text (the common
   * case: its UTF-8 bytes are its code units) is written whole, once, and the two ranges moved into place within the
   * buffer (no slice, one encoding call); any other text is written as its two slices.
   */
  cut(entry: HeaderEntry): void {
    const { text, membersEnd, updatedStart, updatedEnd } = entry;
    this.#room(text.length * MAX_BYTES_PER_UNIT + 1);
    const buffer = this.#buffer;
    const at = this.#at;
    if (buffer.write(text, at, "utf8") === text.length) {
      // buffer[at] is the text's own `{`; the members follow it, then the updatedAt member, then `}`.
      buffer.copyWithin(at + 1, at + ENTRY_START, at + membersEnd);
      let end = at + 1 + membersEnd - ENTRY_START;
      buffer.copyWithin(end, at + updatedStart, at + updatedEnd);
      end += updatedEnd - updatedStart;
      buffer[end] = 0x7d; // }
      this.#at = end + 1;
      return;
    }
    // Slices live only until written: nothing per entry outlives this call.
    this.byte(0x7b); // {
    this.write(text.slice(ENTRY_START, membersEnd));
    this.write(text.slice(updatedStart, updatedEnd));
    this.byte(0x7d); // }
  }

  byte(value: number): void {
    this.#room(1);
    this.#buffer[this.#at++] = value;
  }

  /** A place for `entry`'s text, written by `chunks` (the entry may still change until then). */
  defer(entry: ListedProduct): void {
    if (this.#at > 0) this.#done.push(this.#buffer.subarray(0, this.#at));
    this.#done.push(entry);
    this.#buffer = this.#buffer.subarray(this.#at);
    this.#at = 0;
  }

  #room(bytes: number): void {
    if (this.#at + bytes <= this.#buffer.length) return;
    if (this.#at > 0) this.#done.push(this.#buffer.subarray(0, this.#at));
    this.#buffer = Buffer.allocUnsafeSlow(Math.max(bytes, CHUNK_BYTES));
    this.#at = 0;
  }

  /** What was written, in order (views of the buffers, not copies), each deferred entry as `text` writes it. */
  chunks(text: (entry: ListedProduct) => string): Buffer[] {
    if (this.#at > 0) this.#done.push(this.#buffer.subarray(0, this.#at));
    return this.#done.map((part) => (Buffer.isBuffer(part) ? part : Buffer.from(text(part), "utf8")));
  }
}
