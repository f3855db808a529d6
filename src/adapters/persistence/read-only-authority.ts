/**
 * A `RunStateAuthority` that only reads (guarantee 3, "Reading never writes"): the operator commands and the
 * dashboard go through it, so whatever backend is underneath, nothing they do can write to the store.
 *
 * Owns the refusal of writes only: every read is passed through unchanged; every write (`put`, `delete`,
 * `appendEvents`, `deleteStream`, `pruneEvents`) throws `AuthorityFailure` without reaching the backend.
 */
import {
  AuthorityFailure,
  type AuthorityChange,
  type ListedRecord,
  type RecordInfo,
  type RunStateAuthority,
  type StoredEvent,
  type StoredRecord,
} from "../../core/ports.js";
import { listRecordValues } from "../../core/indexed-records.js";

export class ReadOnlyAuthority implements RunStateAuthority {
  readonly name: string;

  constructor(private readonly inner: RunStateAuthority) {
    this.name = inner.name;
  }

  get(projectId: string, kind: string, id: string): Promise<StoredRecord | null> {
    return this.inner.get(projectId, kind, id);
  }

  list(projectId: string, kind: string, prefix?: string): Promise<RecordInfo[]> {
    return this.inner.list(projectId, kind, prefix);
  }

  listValues(projectId: string, kind: string, prefix?: string): Promise<ListedRecord[]> {
    return listRecordValues(this.inner, projectId, kind, prefix);
  }

  readEvents(projectId: string, stream: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    return this.inner.readEvents(projectId, stream, afterSeq, limit);
  }

  /** The backend's `listAcrossProjects` (a read), bound to it; `undefined` when it has none. */
  get listAcrossProjects(): RunStateAuthority["listAcrossProjects"] {
    const listAcross = this.inner.listAcrossProjects;
    return listAcross === undefined ? undefined : (kind, options) => listAcross.call(this.inner, kind, options);
  }

  /** The backend's `listByCreation` (a read), bound to it; `undefined` when it has none. */
  get listByCreation(): RunStateAuthority["listByCreation"] {
    const list = this.inner.listByCreation;
    return list === undefined ? undefined : (kind, options) => list.call(this.inner, kind, options);
  }

  /** The backend's `listTexts` (a read), bound to it; `undefined` when it has none. */
  get listTexts(): RunStateAuthority["listTexts"] {
    const list = this.inner.listTexts;
    return list === undefined ? undefined : (kind, options) => list.call(this.inner, kind, options);
  }

  /** The backend's `listTextsByCreation` (a read), bound to it; `undefined` when it has none. */
  get listTextsByCreation(): RunStateAuthority["listTextsByCreation"] {
    const list = this.inner.listTextsByCreation;
    return list === undefined ? undefined : (kind, options, onBatch) => list.call(this.inner, kind, options, onBatch);
  }

  listProjects(): Promise<string[]> {
    return this.inner.listProjects ? this.inner.listProjects() : Promise.resolve([]);
  }

  watch(listener: (change: AuthorityChange) => void): () => void {
    return this.inner.watch ? this.inner.watch(listener) : () => undefined;
  }

  put(): Promise<{ revision: number }> {
    return Promise.reject(this.refuseLater("writing a record"));
  }

  delete(): Promise<boolean> {
    return Promise.reject(this.refuseLater("deleting a record"));
  }

  appendEvents(): Promise<{ lastSeq: number }> {
    return Promise.reject(this.refuseLater("appending events"));
  }

  deleteStream(): Promise<boolean> {
    return Promise.reject(this.refuseLater("deleting a stream"));
  }

  pruneEvents(): Promise<number> {
    return Promise.reject(this.refuseLater("pruning events"));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private refuseLater(what: string): AuthorityFailure {
    return new AuthorityFailure(`This store is open read-only; ${what} is refused.`);
  }
}
