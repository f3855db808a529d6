/**
 * The lease records of products and goal runs in the run-state authority (record kind `lease`, guarantee 6): read
 * (with a cache per change mark), written and deleted by compare-and-swap. The policy (who may take, renew or release
 * a lease, and when) is lease.ts's; ProductStore hands its lease calls here. Never performs I/O of its own: the
 * authority is a port.
 */
import type { RunStateAuthority } from "../ports.js";
import { AuthorityConflict } from "../ports.js";
import { LeaseRecord } from "./records.js";

/** What `read` answers. */
export interface LeaseRead {
  lease: LeaseRecord | null;
  revision: number | null;
  invalid: boolean;
}

/** Lease reads kept per change mark (see `read`); past this many the whole set is dropped. */
const MAX_KEPT_LEASE_READS = 1024;

function copyLeaseRead(read: LeaseRead): LeaseRead {
  return { lease: read.lease ? { ...read.lease } : null, revision: read.revision, invalid: read.invalid };
}

export class LeaseRecords {
  /** The last lease read of each product with the change mark it was read at (`read`). */
  readonly #kept = new Map<string, { mark: string; read: LeaseRead }>();

  constructor(private readonly authority: RunStateAuthority) {}

  /**
   * Reads a product's lease. `lease` is `null` when there is no record or when the record does not parse (an invalid
   * lease proves no live owner; `invalid` says which); `revision` is the record's revision either way, for a CAS
   * take-over. Never writes. With `mark` (`changeMark()`, taken before the call), a read of the same product at the
   * same mark is answered from memory (nothing was committed since; issue 16); without one the authority is read.
   */
  async read(projectId: string, productId: string, mark?: string): Promise<LeaseRead> {
    const key = `${projectId}\u0000${productId}`;
    if (mark !== undefined) {
      const kept = this.#kept.get(key);
      if (kept !== undefined && kept.mark === mark) return copyLeaseRead(kept.read);
    }
    const rec = await this.authority.get(projectId, "lease", productId);
    let read: LeaseRead;
    if (!rec) read = { lease: null, revision: null, invalid: false };
    else {
      const parsed = LeaseRecord.safeParse(rec.value);
      read = parsed.success
        ? { lease: parsed.data, revision: rec.revision, invalid: false }
        : { lease: null, revision: rec.revision, invalid: true };
    }
    if (mark !== undefined) {
      if (this.#kept.size >= MAX_KEPT_LEASE_READS) this.#kept.clear();
      this.#kept.set(key, { mark, read: copyLeaseRead(read) });
    } else this.#kept.delete(key);
    return read;
  }

  /**
   * Writes a product's lease by compare-and-swap (`expectedRevision: null` = must not exist) and returns the new
   * revision. Throws `AuthorityConflict` when someone else wrote it first, `AuthorityFailure` when the write failed.
   */
  async put(
    projectId: string,
    productId: string,
    lease: LeaseRecord,
    expectedRevision: number | null,
  ): Promise<number> {
    const { revision } = await this.authority.put(projectId, "lease", productId, lease, expectedRevision);
    return revision;
  }

  /** Deletes a lease still at `expectedRevision` (`false`: gone or changed); `announce` as DeleteOptions says. */
  async delete(projectId: string, productId: string, expectedRevision: number, announce = true): Promise<boolean> {
    try {
      return await this.authority.delete(projectId, "lease", productId, expectedRevision, { announce });
    } catch (err) {
      if (err instanceof AuthorityConflict) return false;
      throw err;
    }
  }
}
