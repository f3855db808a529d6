/**
 * The bytes of an unpaged `product.list` answer (PROTOCOL.md section 5; issue 32: 100,000 stored products), written
 * from entries cut from the stored headers (core/product/header-entry.ts) without parsing or serialising them again,
 * straight into one buffer (no 22 MB string to join and encode again). Pure: no I/O.
 */
import { ENTRY_START, type HeaderEntry } from "../core/product/header-entry.js";
import { isCut, type ListedProduct } from "../core/product/product-list.js";
import { escapeLineSeparators, JsonText } from "./json-text.js";

/** Most UTF-8 bytes one UTF-16 code unit takes (a surrogate pair takes 4 for 2). */
const MAX_BYTES_PER_UNIT = 3;

/**
 * `{"products":[…],"dropped":n}` from `products` as UTF-8, each entry cut from its stored header (`HeaderEntry`: `{`,
 * its two ranges of the stored text, `}`) or an object (`JSON.stringify`): the bytes `serializeJson` gives for the same
 * answer as objects. A cut entry holds no U+2028/U+2029 (header-entry.ts), so only an object's text is escaped.
 */
export function listText(products: readonly (ListedProduct | HeaderEntry)[], dropped: number): JsonText {
  const out = new Output(products.length * 256);
  out.write('{"products":[');
  for (let i = 0; i < products.length; i++) {
    const entry = products[i] as ListedProduct | HeaderEntry;
    if (isCut(entry)) {
      // Slices live only until written: nothing per entry outlives this loop.
      out.write(i === 0 ? "{" : ",{");
      out.write(entry.text.slice(ENTRY_START, entry.membersEnd));
      out.write(entry.text.slice(entry.updatedStart, entry.updatedEnd));
      out.write("}");
    } else {
      if (i > 0) out.write(",");
      out.write(escapeLineSeparators(JSON.stringify(entry)));
    }
  }
  out.write(`],"dropped":${JSON.stringify(dropped)}}`);
  return JsonText.fromBytes(out.bytes());
}

/** A growing UTF-8 buffer: room for the worst case of each text is made before it is written, so none is cut short. */
class Output {
  #buffer: Buffer;
  #at = 0;

  constructor(expected: number) {
    this.#buffer = Buffer.allocUnsafe(Math.max(1024, expected));
  }

  write(text: string): void {
    const need = this.#at + text.length * MAX_BYTES_PER_UNIT;
    if (need > this.#buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.#buffer.length * 2));
      this.#buffer.copy(grown, 0, 0, this.#at);
      this.#buffer = grown;
    }
    this.#at += this.#buffer.write(text, this.#at, "utf8");
  }

  /** What was written (a view of the buffer, not a copy). */
  bytes(): Buffer {
    return this.#buffer.subarray(0, this.#at);
  }
}
