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
import { closeSync, openSync, readSync } from "node:fs";

/** Bytes of the two copies of the wal-index header. */
export const WAL_INDEX_HEADER_BYTES = 96;

/** The `-shm` file of one database, open for reading. */
export class WalIndexHeader {
  private constructor(private fd: number | undefined) {}

  /**
   * Opens `<databasePath>-shm` read-only; `undefined` when it cannot be opened (no such file yet, an in-memory
   * database, a read-only folder): then callers ask SQLite every time.
   */
  static open(databasePath: string): WalIndexHeader | undefined {
    try {
      return new WalIndexHeader(openSync(`${databasePath}-shm`, "r"));
    } catch {
      return undefined;
    }
  }

  /**
   * Reads the header's bytes into `into` (at least `WAL_INDEX_HEADER_BYTES` long). False when they could not all be
   * read (a file shorter than the header, a closed reader, an I/O error): then `into` means nothing.
   */
  read(into: Buffer): boolean {
    if (this.fd === undefined) return false;
    try {
      return readSync(this.fd, into, 0, WAL_INDEX_HEADER_BYTES, 0) === WAL_INDEX_HEADER_BYTES;
    } catch {
      return false;
    }
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
