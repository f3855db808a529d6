/**
 * The commits `GitWorkspace` made itself (captures and merge commits) with their parents and trees, so the worktree
 * path asks git nothing it already knows (issue 34: each git process costs as much as the raw floor's index work at
 * 10,000 files):
 * - a capture on a base whose tree is known and that wrote that same tree changed nothing: no `diff-tree`;
 * - a merge of a commit captured on the head itself is a fast-forward, without `git merge-base`;
 * - a merge of a commit captured fresh (its object did not exist before its `commit-tree`: git-workspace.ts) on a base
 *   that is a known ancestor of the head, after the head existed, is a real merge, without `git merge-base`: the head
 *   cannot be an ancestor of the commit (it descends from the commit's only parent and is not it), and the commit
 *   cannot be an ancestor of the head (nothing that existed before the commit was written can descend from it).
 *
 * A record says what git answered when the commit was written (`commit-tree` with these parents and this tree), so it
 * is true for the commit id whatever happens to refs later. Bounded: the oldest records go first. Never runs git.
 */

/** Commits remembered at most (a product's captured, not yet merged commits are far fewer). */
const KEPT = 10_000;
/** Known commits visited at most when looking for an ancestor. */
const WALK = 256;

interface Known {
  parents: readonly string[];
  tree: string;
  /** When this process learnt that the commit exists (a tick of `KnownCommits`' counter, not a clock). */
  seen: number;
  /** A fresh commit: the tick taken before the `commit-tree` that wrote its object, which did not exist before. */
  bornAfter?: number;
}

export class KnownCommits {
  private readonly commits = new Map<string, Known>();
  private clock = 0;

  /** A tick of the counter: take it before a `commit-tree` whose commit may be recorded as fresh. */
  tick(): number {
    return ++this.clock;
  }

  /**
   * Records a commit this adapter wrote with `commit-tree` (these parents, this tree). `bornAfter`: the tick taken
   * before that `commit-tree`, when its object provably did not exist before it (a fresh commit).
   */
  record(commit: string, parents: readonly string[], tree: string, bornAfter?: number): void {
    const known = this.commits.get(commit);
    if (known !== undefined) {
      // Written again: it existed since the first write, so it is not fresh any more.
      this.commits.set(commit, { parents: known.parents, tree: known.tree, seen: known.seen });
      return;
    }
    if (this.commits.size >= KEPT) this.commits.delete(this.commits.keys().next().value as string);
    this.commits.set(commit, { parents, tree, seen: ++this.clock, ...(bornAfter !== undefined ? { bornAfter } : {}) });
  }

  /** The tree of a known commit, or `undefined`. */
  treeOf(commit: string): string | undefined {
    return this.commits.get(commit)?.tree;
  }

  /** The only parent of a known commit that has one, or `undefined`. */
  parentOf(commit: string): string | undefined {
    const parents = this.commits.get(commit)?.parents;
    return parents?.length === 1 ? parents[0] : undefined;
  }

  /**
   * True when merging `commit` into `head` is provably neither fast-forward (see the file comment): `commit` is a
   * fresh capture with one parent, `head` was known to exist before its `commit-tree` started, and that parent is a
   * known ancestor of `head` other than `head` itself. False means "ask git".
   */
  divergent(head: string, commit: string): boolean {
    const c = this.commits.get(commit);
    const h = this.commits.get(head);
    const parent = c?.parents.length === 1 ? c.parents[0] : undefined;
    if (c?.bornAfter === undefined || h === undefined || parent === undefined || head === parent) return false;
    if (h.seen >= c.bornAfter) return false;
    const queue = [...h.parents];
    const visited = new Set<string>();
    while (queue.length > 0 && visited.size < WALK) {
      const next = queue.shift() as string;
      if (next === parent) return true;
      if (visited.has(next)) continue;
      visited.add(next);
      queue.push(...(this.commits.get(next)?.parents ?? []));
    }
    return false;
  }
}
