/**
 * Lays out a product's task DAG for the dashboard (issue 15) with the dagre graph-layout library: one box per task,
 * ranked top to bottom along `dependsOn`, and each dependency edge as a polyline routed around the boxes.
 *
 * Pure function of the tasks (no I/O): the dashboard server calls it and the page only draws what it returns. Units
 * are SVG user units (CSS pixels at zoom 1); `width`/`height` bound every node and edge point.
 */
import dagre, { type Edge, type Point } from "@dagrejs/dagre";

/** What the layout needs of a task. */
export interface LayoutTask {
  taskId: string;
  title: string;
  dependsOn: readonly string[];
}

/** A task box: `x`/`y` is its top-left corner. */
export interface LaidOutNode {
  taskId: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A dependency edge from `from` (the prerequisite) to `to`, as points from the first box to the second. */
export interface LaidOutEdge {
  from: string;
  to: string;
  points: { x: number; y: number }[];
}

export interface DagLayout {
  width: number;
  height: number;
  nodes: LaidOutNode[];
  edges: LaidOutEdge[];
}

/** Box size of every task node (the page clips titles to fit). */
export const NODE_WIDTH = 220;
export const NODE_HEIGHT = 56;
/** Above this many tasks the boxes are compact (so 200 tasks fit one 1080p screen after "fit"). */
export const COMPACT_ABOVE = 60;
export const COMPACT_WIDTH = 150;
export const COMPACT_HEIGHT = 44;
const MARGIN = 16;

/**
 * Positions `tasks` top to bottom. A dependency on a task that is not in `tasks` is ignored (a stored plan may be
 * mid-replan); the layout is deterministic for the same input.
 */
export function layoutDag(tasks: readonly LayoutTask[]): DagLayout {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  const compact = tasks.length > COMPACT_ABOVE;
  g.setGraph({
    rankdir: "TB",
    nodesep: compact ? 12 : 28,
    ranksep: compact ? 26 : 44,
    marginx: MARGIN,
    marginy: MARGIN,
  });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(tasks.map((t) => t.taskId));
  const size = compact ? { width: COMPACT_WIDTH, height: COMPACT_HEIGHT } : { width: NODE_WIDTH, height: NODE_HEIGHT };
  for (const t of tasks) g.setNode(t.taskId, { ...size });
  for (const t of tasks) for (const d of t.dependsOn) if (ids.has(d) && d !== t.taskId) g.setEdge(d, t.taskId);
  dagre.layout(g);
  const nodes: LaidOutNode[] = tasks.map((t) => {
    const n = g.node(t.taskId);
    return { taskId: t.taskId, x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height };
  });
  const edges: LaidOutEdge[] = g.edges().map((e: Edge) => ({
    from: e.v,
    to: e.w,
    points: ((g.edge(e) as { points?: Point[] }).points ?? []).map((p: Point) => ({ x: p.x, y: p.y })),
  }));
  const graph = g.graph();
  const width = Math.max(graph.width ?? 0, ...nodes.map((n) => n.x + n.width + MARGIN), 2 * MARGIN);
  const height = Math.max(graph.height ?? 0, ...nodes.map((n) => n.y + n.height + MARGIN), 2 * MARGIN);
  return { width, height, nodes, edges };
}
