/**
 * The dashboard page (issue 15): one HTML document, its stylesheet and its script, served as they are by
 * dashboard-server.ts. No build step and no third-party code run in the browser: the DAG arrives laid out by the
 * server (graph-layout.ts, dagre), and the page only draws it as SVG and keeps it current from a server-sent event
 * stream (`/api/stream`), without reloading.
 *
 * Routes inside the page (the URL hash): `#/` products and goal runs, `#/product/ID` (the DAG, the selected task's
 * output, error, attempts, durations, commit and changed files, budget, recovery, integration, checkpoints),
 * `#/product/ID/TASK` (the same with TASK selected), `#/goal/ID` (criteria and phases). Text from the store is always
 * set as text (`textContent`), never parsed as HTML.
 *
 * Issue 29 adds, with page-views.ts: the buttons, filters by state and agent (non-matching nodes dimmed, rows
 * hidden), zoom, pan and fit of the DAG (d3-zoom), a task's attempt history and diff (diff2html), the product's diff,
 * the timeline, and a running task's live output (`liveOutput`, persisted by the owner in bounded chunks). The
 * third-party code is bundled at build time (scripts/bundle.ts) and served by the dashboard itself (`/vendor.js`).
 *
 * Stable hooks for tests and users' scripts: `[data-product-id]` rows, `svg g.node[data-task-id][data-status]`,
 * `#task-detail`, `#task-output` (`data-live`), `#stream-state` (`live` once the stream delivered a view),
 * `#filter-state`, `#filter-agent`, `#tasks tr[data-task-id]`, `#show-diff`, `#show-product-diff`, and page-views.ts's.
 */
import { DOM_HELPERS, VIEWS_SCRIPT } from "./page-views.js";

export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>acp-orchestrator</title>
<link rel="stylesheet" href="/vendor.css">
<link rel="stylesheet" href="/app.css">
</head>
<body>
<header>
  <a href="#/" class="brand">acp-orchestrator</a>
  <span id="store" class="muted"></span>
  <span id="stream-state" class="pill">connecting</span>
</header>
<main id="app"></main>
<script src="/vendor.js"></script>
<script src="/app.js"></script>
</body>
</html>
`;

export const PAGE_CSS = `
:root { font-family: system-ui, sans-serif; font-size: 14px; color: #212529; background: #f8f9fa; }
body { margin: 0; }
header { display: flex; gap: 12px; align-items: center; padding: 8px 16px; background: #212529; color: #fff; }
header a.brand { color: #fff; font-weight: 600; text-decoration: none; }
header .muted { color: #adb5bd; font-size: 12px; }
main { padding: 12px 16px; }
h1 { font-size: 18px; margin: 4px 0 8px; }
h2 { font-size: 15px; margin: 16px 0 6px; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #dee2e6; vertical-align: top; }
th { background: #e9ecef; font-weight: 600; }
tr.clickable { cursor: pointer; }
tr.clickable:hover { background: #f1f3f5; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; border: 1px solid #adb5bd; }
.pill.live { background: #d1e7dd; color: #0f5132; border-color: #198754; }
.pill.down { background: #f8d7da; color: #842029; border-color: #dc3545; }
.muted { color: #6c757d; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; background: #fff; padding: 8px; border: 1px solid #dee2e6; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; white-space: pre-wrap; }
.layout { display: flex; gap: 16px; align-items: flex-start; flex-wrap: wrap; }
.dag { background: #fff; border: 1px solid #dee2e6; flex: 2 1 600px; min-width: 400px; position: relative; }
.dag svg#dag { display: block; width: 100%; height: calc(100vh - 150px); min-height: 420px; cursor: grab; }
.dag .zoom { position: absolute; top: 6px; right: 6px; display: flex; gap: 4px; }
.dag g.node.dim { opacity: 0.15; }
.dag g.node.superseded rect { stroke-dasharray: 6 3; }
.controls { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; margin: 8px 0; }
.controls button { padding: 3px 10px; border: 1px solid #6c757d; border-radius: 4px; background: #fff; cursor: pointer; }
.controls button:disabled { opacity: 0.4; cursor: default; }
.controls button[data-verb=cancel], .controls button[data-verb=rollback] { border-color: #dc3545; color: #842029; }
.control-result.ok { color: #0f5132; } .control-result.error { color: #842029; } .control-result.busy { color: #6c757d; }
.filters { display: flex; gap: 10px; align-items: center; margin: 6px 0; }
tr[data-hidden] { display: none; }
svg#timeline text.seat { font-size: 12px; } svg#timeline text.tick, svg#timeline text.bar-label { font-size: 10px; fill: #495057; }
svg#timeline rect.bar { cursor: pointer; }
#diff { background: #fff; max-height: 640px; overflow: auto; }
.dag g.node { cursor: pointer; }
.dag g.node text { font-size: 12px; fill: #212529; pointer-events: none; }
.dag g.node.selected rect { stroke-width: 4; }
.dag path.edge { fill: none; stroke: #868e96; stroke-width: 1.5; }
.detail { flex: 1 1 380px; min-width: 320px; }
pre { background: #212529; color: #f8f9fa; padding: 8px; overflow: auto; max-height: 420px; white-space: pre-wrap; word-break: break-word; margin: 0; }
.legend span { margin-right: 10px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; border: 2px solid; border-radius: 3px; vertical-align: middle; margin-right: 3px; }
.error { color: #842029; }
ul.timeline { list-style: none; padding: 0; margin: 0; background: #fff; border: 1px solid #dee2e6; }
ul.timeline li { padding: 3px 8px; border-bottom: 1px solid #f1f3f5; }
textarea#answer-text { flex: 1 1 240px; font: inherit; }
`;

export const MAIN_SCRIPT = String.raw`"use strict";
(function () {
  var app = document.getElementById("app");
  var streamState = document.getElementById("stream-state");
  var storeLabel = document.getElementById("store");
  var source = null;
  var current = null; // {kind, id, taskId}
  var lastView = null;
  // A view that arrives while a mouse button is held is drawn once it is released (after its click): a redraw between
  // the press and the release replaces the button under the pointer, and the browser then sends no click at all.
  // A press held past HOLD_MS no longer holds views back.
  var HOLD_MS = 3000;
  var pressedAt = 0;
  var heldView = false;
  document.addEventListener("pointerdown", function () { pressedAt = Date.now(); }, true);
  function released() {
    pressedAt = 0;
    if (!heldView) return;
    heldView = false;
    if (lastView) render(lastView);
  }
  document.addEventListener("pointerup", function () { setTimeout(released, 0); }, true);
  document.addEventListener("pointercancel", function () { setTimeout(released, 0); }, true);
  function pressed() { return pressedAt > 0 && Date.now() - pressedAt < HOLD_MS; }
  var STATUS_STYLE = {
    pending: ["#eeeeee", "#999999"], running: ["#cfe2ff", "#0d6efd"], waiting: ["#fff3cd", "#ffc107"],
    completed: ["#d1e7dd", "#198754"], failed: ["#f8d7da", "#dc3545"], skipped: ["#e2e3e5", "#6c757d"],
    cancelled: ["#e2e3e5", "#6c757d"], superseded: ["#f1e4e6", "#a66a73"]
  };
${DOM_HELPERS}
  function duration(ms) {
    if (typeof ms !== "number" || !isFinite(ms) || ms < 0) return "-";
    if (ms < 999.5) return Math.round(ms) + " ms";
    if (ms < 59950) return (ms / 1000).toFixed(1) + " s";
    var s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  }
  function ago(iso) {
    var t = Date.parse(iso);
    return isFinite(t) ? duration(Math.max(0, Date.now() - t)) + " ago" : String(iso);
  }
  function facts(pairs) {
    var dl = el("dl", { class: "facts" });
    pairs.forEach(function (p) {
      if (p[1] === undefined || p[1] === null || p[1] === "") return;
      dl.appendChild(el("dt", { text: p[0] }));
      dl.appendChild(el("dd", { text: String(p[1]) }));
    });
    return dl;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function route() {
    var parts = (location.hash || "#/").slice(1).split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "product" && parts[1]) return { kind: "product", id: parts[1], taskId: parts[2] };
    if (parts[0] === "goal" && parts[1]) return { kind: "goal", id: parts[1] };
    return { kind: "overview" };
  }
  function apiPath(r) {
    if (r.kind === "product") return "/api/products/" + encodeURIComponent(r.id);
    if (r.kind === "goal") return "/api/goals/" + encodeURIComponent(r.id);
    return "/api/overview";
  }

  function connect() {
    var r = route();
    var samePage = current && current.kind === r.kind && current.id === r.id;
    current = r;
    if (samePage && source) { if (lastView) render(lastView); return; }
    if (source) source.close();
    lastView = null;
    clear(app);
    app.appendChild(el("p", { class: "muted", text: "Loading…" }));
    streamState.textContent = "connecting";
    streamState.className = "pill";
    source = new EventSource("/api/stream?path=" + encodeURIComponent(apiPath(r)));
    source.addEventListener("view", function (e) {
      streamState.textContent = "live";
      streamState.className = "pill live";
      lastView = JSON.parse(e.data);
      streamState.dataset.views = String(Number(streamState.dataset.views || 0) + 1);
      if (pressed()) heldView = true;
      else render(lastView);
    });
    source.addEventListener("problem", function (e) {
      var p = JSON.parse(e.data);
      clear(app);
      app.appendChild(el("p", { class: "error", text: p.error }));
      app.appendChild(el("p", {}, [el("a", { href: "#/", text: "All products" })]));
    });
    source.onerror = function () {
      streamState.textContent = "reconnecting";
      streamState.className = "pill down";
    };
  }

  function render(view) {
    if (current.kind === "product") renderProduct(view);
    else if (current.kind === "goal") renderGoal(view);
    else renderOverview(view);
  }

  function renderOverview(v) {
    storeLabel.textContent = v.store;
    clear(app);
    app.appendChild(el("h1", { text: "Products" }));
    if (v.products.length === 0) app.appendChild(el("p", { class: "muted", text: "No products in this store yet." }));
    else {
      var table = el("table", { id: "products" }, [el("tr", {}, ["Product", "Name", "Phase", "Progress", "Owner", "Updated"].map(function (h) { return el("th", { text: h }); }))]);
      v.products.forEach(function (p) {
        var progress = p.progress.completed + "/" + p.progress.total + (p.progress.running ? ", " + p.progress.running + " running" : "") + (p.progress.failed ? ", " + p.progress.failed + " failed" : "");
        var owner = p.owner ? (p.owner.live ? "live " : "expired ") + p.owner.ownerId : "-";
        table.appendChild(el("tr", { class: "clickable", "data-product-id": p.productId, "data-phase": p.phase, onclick: function () { location.hash = "#/product/" + encodeURIComponent(p.productId); } }, [
          el("td", {}, [el("a", { href: "#/product/" + encodeURIComponent(p.productId), text: p.productId })]),
          el("td", { text: p.name }), el("td", { text: p.phase }), el("td", { text: progress }),
          el("td", { text: owner }), el("td", { text: ago(p.updatedAt) })
        ]));
      });
      app.appendChild(table);
    }
    app.appendChild(el("h2", { text: "Goal runs" }));
    if (v.goals.length === 0) app.appendChild(el("p", { class: "muted", text: "No goal runs." }));
    else {
      var goals = el("table", { id: "goals" }, [el("tr", {}, ["Goal run", "Status", "Phase", "Goal"].map(function (h) { return el("th", { text: h }); }))]);
      v.goals.forEach(function (g) {
        goals.appendChild(el("tr", { class: "clickable", "data-goal-run-id": g.goalRunId, onclick: function () { location.hash = "#/goal/" + encodeURIComponent(g.goalRunId); } }, [
          el("td", {}, [el("a", { href: "#/goal/" + encodeURIComponent(g.goalRunId), text: g.goalRunId })]),
          el("td", { text: g.status }), el("td", { text: String(g.phaseIndex + 1) }), el("td", { text: String(g.goal).split("\n")[0] })
        ]));
      });
      app.appendChild(goals);
    }
  }

  var zoomState = { productId: null, transform: null };
  var filters = { state: "", agent: "" };
  var fetched = { attempts: "", timeline: 0 };
  var keep = {};
  function kept(id) { return keep[id] || (keep[id] = el("div", { id: id })); }
  function visible(t) {
    return (!filters.state || t.status === filters.state) && (!filters.agent || t.agent === filters.agent);
  }
  function drawDag(v, selected) {
    var L = v.layout;
    var box = svg("svg", { id: "dag", "data-width": String(L.width), "data-height": String(L.height) });
    var defs = svg("defs", {});
    var marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#868e96" }));
    defs.appendChild(marker);
    box.appendChild(defs);
    var viewport = svg("g", { id: "viewport" });
    box.appendChild(viewport);
    L.edges.forEach(function (e) {
      if (e.points.length === 0) return;
      var d = "M " + e.points.map(function (p) { return p.x + " " + p.y; }).join(" L ");
      viewport.appendChild(svg("path", { class: "edge", d: d, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
    });
    var byId = {};
    v.tasks.forEach(function (t) { byId[t.taskId] = t; });
    var compact = L.nodes.length > 0 && L.nodes[0].height < 50;
    L.nodes.forEach(function (n) {
      var t = byId[n.taskId];
      var cls = "node" + (n.taskId === selected ? " selected" : "") + (visible(t) ? "" : " dim") + (t.supersededBy ? " superseded" : "");
      var g = svg("g", { class: cls, "data-task-id": n.taskId, "data-status": t.status, "data-agent": t.agent, transform: "translate(" + n.x + "," + n.y + ")" });
      g.appendChild(svg("rect", { width: String(n.width), height: String(n.height), rx: "6", ry: "6", fill: t.fill, stroke: t.stroke, "stroke-width": "2" }));
      var title = svg("text", { x: "8", y: compact ? "17" : "20" });
      var label = t.taskId + ": " + t.title;
      var max = compact ? 22 : 30;
      title.textContent = label.length > max ? label.slice(0, max - 1) + "…" : label;
      g.appendChild(title);
      var sub = svg("text", { x: "8", y: compact ? "34" : "40" });
      sub.textContent = t.status + (t.attempts > 1 ? " · attempt " + t.attempts : "") + (t.durationMs !== undefined ? " · " + duration(t.durationMs) : "") + " · " + t.agent;
      g.appendChild(sub);
      var tip = svg("title", {});
      tip.textContent = label + (t.supersededBy ? " (superseded by " + t.supersededBy + ")" : "");
      g.appendChild(tip);
      g.addEventListener("click", function () { location.hash = "#/product/" + encodeURIComponent(current.id) + "/" + encodeURIComponent(n.taskId); });
      viewport.appendChild(g);
    });
    return { box: box, viewport: viewport };
  }

  function renderTask(v, t) {
    var panel = el("section", { id: "task-detail", class: "detail", "data-task-id": t ? t.taskId : "" });
    if (!t) { panel.appendChild(el("p", { class: "muted", text: "Select a task in the graph." })); return panel; }
    panel.appendChild(el("h2", { text: t.taskId + ": " + t.title }));
    panel.appendChild(window.acpViews.taskControls(t, current.id));
    panel.appendChild(facts([
      ["status", t.status + (t.proposed ? " (plan not confirmed yet)" : "")], ["agent", t.agent], ["attempts", t.attempts],
      ["superseded by", t.supersededBy], ["fix-up of", t.supersedes],
      ["after", t.dependsOn.join(", ") || "-"], ["started", t.startedAt], ["ended", t.endedAt],
      ["duration", t.durationMs !== undefined ? duration(t.durationMs) : undefined],
      ["superseded by", t.supersededBy], ["supersedes", t.supersedes],
      ["error", t.error], ["interrupted", t.interruption], ["waiting for", t.question || t.waitingFor],
      ["branch", t.branch], ["commit", t.commit],
      ["changed files", t.changedFiles ? (t.changedFiles.length ? t.changedFiles.join("\n") : "none") : undefined],
      ["refused", t.refusedPermissions ? t.refusedPermissions.map(function (r) { return r.kind + " " + r.title + " (by " + r.by + ")"; }).join("\n") : undefined]
    ]));
    var head = el("h2", { text: "Output" });
    if (t.outputLength > t.outputTail.length) {
      head.appendChild(document.createTextNode(" "));
      head.appendChild(el("a", { href: "/api/products/" + encodeURIComponent(current.id) + "/tasks/" + encodeURIComponent(t.taskId) + "/output", target: "_blank", text: "(last " + t.outputTail.length + " of " + t.outputLength + " characters; full output)" }));
    }
    panel.appendChild(head);
    var live = t.liveOutput && (t.status === "running" || t.status === "waiting") ? t.liveOutput : undefined;
    panel.appendChild(el("pre", { id: "task-output", "data-live": live ? "true" : "false", text: live ? live.text : (t.outputTail || (t.status === "running" || t.status === "waiting" ? "(running: no output yet)" : "(no output)")) }));
    panel.appendChild(el("h2", { text: "Attempts" }));
    var attemptsBox = kept("attempts-box");
    panel.appendChild(attemptsBox);
    panel.appendChild(el("h2", {}, ["Change ", el("button", { id: "show-diff", onclick: function () { window.acpViews.diff(current.id, t.taskId, kept("diff")); } }, ["show the task's diff"])]));
    var key = t.taskId + "/" + t.attempts + "/" + t.status;
    if (fetched.attempts !== key) { fetched.attempts = key; window.acpViews.attempts(current.id, t, attemptsBox); }
    return panel;
  }

  function filterBar(v) {
    var bar = el("div", { class: "filters" });
    var states = el("select", { id: "filter-state" }, [el("option", { value: "", text: "every state" })]);
    Object.keys(STATUS_STYLE).forEach(function (k) { states.appendChild(el("option", { value: k, text: k })); });
    states.value = filters.state;
    var agents = el("select", { id: "filter-agent" }, [el("option", { value: "", text: "every agent" })]);
    v.tasks.map(function (t) { return t.agent; }).filter(function (a, i, all) { return all.indexOf(a) === i; }).forEach(function (a) { agents.appendChild(el("option", { value: a, text: a })); });
    agents.value = filters.agent;
    states.addEventListener("change", function () { filters.state = states.value; render(lastView); });
    agents.addEventListener("change", function () { filters.agent = agents.value; render(lastView); });
    bar.appendChild(el("span", { text: "Show" }));
    bar.appendChild(states);
    bar.appendChild(agents);
    bar.appendChild(el("span", { class: "muted", text: v.tasks.filter(visible).length + " of " + v.tasks.length + " tasks" }));
    return bar;
  }

  function renderProduct(v) {
    var s = v.status;
    var keepScroll = window.scrollY;
    if (zoomState.productId !== current.id) { zoomState = { productId: current.id, transform: null }; fetched = { attempts: "", timeline: 0 }; keep = {}; }
    clear(app);
    app.appendChild(el("p", {}, [el("a", { href: "#/", text: "← all products" })]));
    app.appendChild(el("h1", { id: "product-name", text: s.name }));
    app.appendChild(window.acpViews.controls(v, current.id));
    var b = s.budget || {};
    var integration = s.integration ? s.integration.state + " on " + s.integration.branch + (s.integration.targetBranch ? " → " + s.integration.targetBranch : "") + " at " + String(s.integration.head).slice(0, 12) + (s.integration.merged.length ? "\nmerged: " + s.integration.merged.join(", ") : "") + (s.integration.conflict ? "\nconflict" + (s.integration.conflict.taskId ? " in " + s.integration.conflict.taskId : "") + ": " + s.integration.conflict.files.join(", ") : "") : undefined;
    app.appendChild(facts([
      ["product", s.productId], ["phase", s.phase],
      ["progress", s.progress.completed + "/" + s.progress.total + " completed, " + s.progress.running + " running, " + s.progress.failed + " failed, " + s.progress.pending + " pending"],
      ["budget", b.usedTokens + (b.maxTotalTokens ? " of " + b.maxTotalTokens : "") + " tokens (" + (b.tokenSource || "none") + "), " + duration(b.elapsedMs) + (b.maxDurationMs ? " of " + duration(b.maxDurationMs) : "")],
      ["owner", s.owner ? (s.owner.live ? "driven by server " + s.owner.ownerId + (s.owner.renewedAt ? " (renewed " + duration(Math.max(0, Date.now() - Date.parse(s.owner.renewedAt))) + " ago)" : "") : "expired " + s.owner.ownerId) + ", lease until " + s.owner.expiresAt : undefined],
      ["recovery", s.recovery ? s.recovery.cause + "\n" + (s.recovery.resumable ? "resumable: " : "not resumable: ") + s.recovery.remediation : undefined],
      ["isolation", s.isolation ? s.isolation + (s.isolationNote ? " (" + s.isolationNote + ")" : "") : undefined],
      ["integration", integration],
      ["dropped", s.dropped ? s.dropped + " stored records failed validation" : undefined]
    ]));
    var legend = el("p", { class: "legend" });
    Object.keys(STATUS_STYLE).forEach(function (k) {
      var i = el("i", { style: "background:" + STATUS_STYLE[k][0] + ";border-color:" + STATUS_STYLE[k][1] });
      legend.appendChild(el("span", {}, [i, k]));
    });
    app.appendChild(legend);
    app.appendChild(filterBar(v));
    var selected = current.taskId;
    var missing = selected && !v.tasks.some(function (t) { return t.taskId === selected; });
    // A link to a task the product does not have says so and selects nothing (issue 28), never another task.
    if (missing) app.appendChild(el("p", { id: "task-not-found", class: "error", text: "Task " + selected + " not found in product " + current.id + "." }));
    if (!selected) {
      var running = v.tasks.filter(function (t) { return t.status === "running"; })[0];
      selected = running ? running.taskId : (v.tasks[0] ? v.tasks[0].taskId : undefined);
    }
    var task = v.tasks.filter(function (t) { return t.taskId === selected; })[0];
    if (v.tasks.length === 0) app.appendChild(el("p", { class: "muted", text: "No plan yet." }));
    else {
      var drawn = drawDag(v, selected);
      var zoomBar = el("div", { class: "zoom" });
      var dagBox = el("div", { class: "dag" }, [drawn.box, zoomBar]);
      app.appendChild(el("div", { class: "layout" }, [dagBox, renderTask(v, task)]));
      var z = window.acpViews.zoomable(drawn.box, drawn.viewport, v.layout, zoomState);
      zoomBar.appendChild(el("button", { id: "fit", onclick: z.fit }, ["fit"]));
      zoomBar.appendChild(el("button", { id: "zoom-reset", onclick: z.reset }, ["1:1"]));
    }
    app.appendChild(el("h2", {}, ["Product change ", el("button", { id: "show-product-diff", onclick: function () { window.acpViews.diff(current.id, undefined, kept("diff")); } }, ["show the product's diff"])]));
    app.appendChild(kept("diff"));
    app.appendChild(el("h2", { text: "Timeline (by instance seat; waits hatched)" }));
    var tl = kept("timeline-box");
    app.appendChild(tl);
    if (Date.now() - fetched.timeline > 1500) {
      fetched.timeline = Date.now();
      window.acpViews.timeline(current.id, tl, function (id) { location.hash = "#/product/" + encodeURIComponent(current.id) + "/" + encodeURIComponent(id); });
    }
    app.appendChild(el("h2", { text: "Tasks" }));
    var table = el("table", { id: "tasks" }, [el("tr", {}, ["Task", "Status", "Attempts", "Duration", "Agent", "After", "Title"].map(function (h) { return el("th", { text: h }); }))]);
    v.tasks.forEach(function (t) {
      var attrs = { class: "clickable", "data-task-id": t.taskId, onclick: function () { location.hash = "#/product/" + encodeURIComponent(current.id) + "/" + encodeURIComponent(t.taskId); } };
      if (!visible(t)) attrs["data-hidden"] = "true";
      table.appendChild(el("tr", attrs, [
        el("td", { text: t.taskId + (t.supersededBy ? " (superseded by " + t.supersededBy + ")" : "") }), el("td", { text: t.status }), el("td", { text: String(t.attempts) }),
        el("td", { text: t.durationMs !== undefined ? duration(t.durationMs) : "-" }), el("td", { text: t.agent }),
        el("td", { text: t.dependsOn.join(", ") || "-" }), el("td", { text: t.title })
      ]));
    });
    app.appendChild(table);
    app.appendChild(el("h2", { text: "Checkpoints (" + v.checkpoints.length + ")" }));
    var list = el("ul", { class: "timeline", id: "checkpoints" });
    v.checkpoints.forEach(function (c) { list.appendChild(el("li", { text: c.at + "  " + c.checkpointId + "  " + c.completed + "/" + c.total + " completed" })); });
    if (v.checkpoints.length === 0) list.appendChild(el("li", { class: "muted", text: "none yet" }));
    app.appendChild(list);
    window.scrollTo(0, keepScroll);
  }

  function renderGoal(g) {
    clear(app);
    app.appendChild(el("p", {}, [el("a", { href: "#/", text: "← all products" })]));
    app.appendChild(el("h1", { text: "Goal run " + g.goalRunId }));
    app.appendChild(facts([
      ["status", g.status], ["phase", g.phaseIndex + 1], ["started", g.startedAt], ["tokens", g.usedTokens],
      ["ended", g.endReason], ["reason", g.failedReason], ["queued messages", g.queuedMessages],
      ["recovery", g.recovery ? g.recovery.cause + "\n" + g.recovery.remediation : undefined]
    ]));
    if (g.productId) app.appendChild(el("p", {}, ["Current product: ", el("a", { href: "#/product/" + encodeURIComponent(g.productId), text: g.productId })]));
    app.appendChild(el("h2", { text: "Goal" }));
    app.appendChild(el("pre", { text: g.goal }));
    app.appendChild(el("h2", { text: "Acceptance criteria (" + g.acceptance.passed + "/" + g.acceptance.total + " pass)" }));
    var ul = el("ul", { id: "criteria" });
    g.acceptance.criteria.forEach(function (c) { ul.appendChild(el("li", { text: (c.passed ? "✓ " : "○ ") + (c.text || c.criterionId || "") })); });
    app.appendChild(ul);
    app.appendChild(el("h2", { text: "Phases" }));
    app.appendChild(el("pre", { id: "phases", text: g.progressSummary }));
  }

  window.addEventListener("hashchange", connect);
  connect();
})();
`;

/** The page's script: the operator views (page-views.ts), then the page. */
export const PAGE_SCRIPT = `${VIEWS_SCRIPT}\n${MAIN_SCRIPT}`;
