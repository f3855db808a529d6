/**
 * A cheap look at whether any connection committed to an SQLite database in WAL mode (issue 16, request path): the
 * wal-index header at the start of the `-shm` file, which every commit rewrites (SQLite's WAL file format,
 * https://www.sqlite.org/walformat.html, "The WAL-Index Header": two 48-byte copies holding the change counter
 * `iChange`, the last valid frame `mxFrame`, and the frame and salt checksums).
 *
 * Owns reading those bytes only; what they mean stays SQLite's. Equal bytes at two reads mean no commit ended in
 * between; any difference (a commit, a checkpoint restarting the log, a torn read of a header being written) means
 * "ask SQLite" (`PRAGMA data_version`). Never writes, never locks.
 */
import { closeSync, openSync, readSync, realpathSync } from "node:fs";

/** Bytes of the two copies of the wal-index header. */
export const WAL_INDEX_HEADER_BYTES = 96;

/** Bytes of one copy of the header. */
const COPY_BYTES = 48;
/** `iVersion` of the wal-index format (the first field, in the machine's byte order). */
const WAL_INDEX_VERSION = 3007000;
/** Offset of `isInit` (1 once a connection built the index). */
const IS_INIT_OFFSET = 12;

/**
 * True when `header` looks like the header of a wal-index in use: the format's version, marked initialised, and the
 * two copies equal (a header being rewritten, or a file that is not a wal-index, fails, and the caller asks SQLite).
 */
function isLiveHeader(header: Buffer): boolean {
  const version = header.readUInt32LE(0) === WAL_INDEX_VERSION || header.readUInt32BE(0) === WAL_INDEX_VERSION;
  return (
    version && header[IS_INIT_OFFSET] === 1 && header.compare(header, 0, COPY_BYTES, COPY_BYTES, 2 * COPY_BYTES) === 0
  );
}

/** True when the first `WAL_INDEX_HEADER_BYTES` bytes of `a` and `b` are equal. */
function sameBytes(a: Buffer, b: Buffer): boolean {
  for (let i = 0; i < WAL_INDEX_HEADER_BYTES; i += 1) if (a[i] !== b[i]) return false;
  return true;
}

/** The `-shm` file of one database, open for reading. */
export class WalIndexHeader {
  private constructor(private fd: number | undefined) {}

  /**
   * Opens `<databasePath>-shm` read-only; `undefined` when it cannot be opened (no such file yet, an in-memory
   * database, a read-only folder): then callers ask SQLite every time.
   */
  static open(databasePath: string): WalIndexHeader | undefined {
    try {
      // SQLite keeps the wal-index beside the file a symbolic link leads to, not beside the link: a stray file at
      // `<link>-shm` would never change (found by review, test in sqlite-authority.test.ts).
      return new WalIndexHeader(openSync(`${realpathSync(databasePath)}-shm`, "r"));
    } catch {
      return undefined;
    }
  }

  /**
   * Reads the header's bytes into `into` (at least `WAL_INDEX_HEADER_BYTES` long). False when they could not all be
   * read (a file shorter than the header, a closed reader, an I/O error) or do not look like a live wal-index header
   * (`isLiveHeader`): then `into` means nothing.
   */
  read(into: Buffer): boolean {
    return this.readSince(into, undefined) === "changed";
  }

  /**
   * `read`, compared with `seen` (bytes an earlier `read` or `readSince` found live): `same` when the bytes read into
   * `into` equal them (so they are live too, and no commit ended in between), `changed` when they differ and look like
   * a live header, `unreadable` when `read` would be false. Compares in JavaScript and checks liveness only when the
   * bytes moved (issue 34, request path: a `product.status` of an unchanged store makes no call but the `pread`).
   */
  readSince(into: Buffer, seen: Buffer | undefined): "same" | "changed" | "unreadable" {
    if (this.fd === undefined) return "unreadable";
    try {
      if (readSync(this.fd, into, 0, WAL_INDEX_HEADER_BYTES, 0) !== WAL_INDEX_HEADER_BYTES) return "unreadable";
    } catch {
      return "unreadable";
    }
    if (seen !== undefined && sameBytes(into, seen)) return "same";
    return isLiveHeader(into) ? "changed" : "unreadable";
  }

  /** Closes the file. Idempotent; later reads return false. */
  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try {
      closeSync(fd);
    } catch {
      // Already gone: nothing to release.
    }
  }
}
