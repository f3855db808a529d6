/**
 * The dashboard page's operator views (issue 29), a script that defines `window.acpViews` for page.ts's script:
 * - `controls(view, productId)`: the product's buttons (pause, resume, cancel, checkpoint, roll back to a chosen
 *   checkpoint, confirm the plan, merge), each enabled in the phases it applies to; destructive ones (cancel, roll
 *   back, retry, merge) ask `window.confirm` first;
 * - `taskControls(task, productId)`: retry a task, answer a waiting task;
 * - `post(body)`: `POST /api/control` with the per-launch key (from the page's `?key=`, kept in sessionStorage), the
 *   answer shown in `#control-result[data-state=ok|error]`; the stream shows the effect;
 * - `attempts(productId, task, into)`, `diff(productId, taskId|undefined, into)`, `timeline(productId, into)`: fetched
 *   views; a diff is drawn by diff2html (escaped by it), the timeline as an SVG Gantt chart by instance seat, waits
 *   hatched;
 * - `zoomable(svg, viewport, layout, state)`: d3-zoom on the DAG, with `fit` and `reset`.
 * `window.acpVendor` (d3-zoom, d3-selection, diff2html, bundled by scripts/bundle.ts) may be missing (a build without
 * it): then there is no zoom and a diff is shown as text.
 *
 * Hooks: `#controls button[data-verb]`, `#rollback-checkpoint`, `#answer-text`, `#control-result`, `#attempts tr`,
 * `#diff`, `svg#timeline rect.bar[data-task-id][data-kind]`, `#fit`, `#zoom-reset`, `g#viewport`.
 */

/**
 * The DOM helpers both scripts of the page use, pasted into each one's closure: `el(tag, {text, onclick, disabled,
 * …attributes}, children)` and `svg(tag, attributes)`.
 */
export const DOM_HELPERS = String.raw`  var SVG = "http://www.w3.org/2000/svg";
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "onclick") node.addEventListener("click", attrs[k]);
      else if (k === "disabled") { if (attrs[k]) node.setAttribute("disabled", ""); }
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }`;

export const VIEWS_SCRIPT = String.raw`"use strict";
(function () {
  var V = window.acpVendor || null;
  var KEY = new URLSearchParams(location.search).get("key");
  if (KEY) sessionStorage.setItem("acp-dashboard-key", KEY); else KEY = sessionStorage.getItem("acp-dashboard-key");
${DOM_HELPERS}
  var result = { state: "", text: "" };
  function showResult() {
    var box = document.getElementById("control-result");
    if (!box) return;
    box.textContent = result.text;
    box.setAttribute("data-state", result.state);
    box.className = "control-result " + result.state;
  }
  function post(body, label) {
    result = { state: "busy", text: label + "…" };
    showResult();
    body.requestId = "web_" + Date.now().toString(36) + Math.random().toString(36).slice(2, 10);
    return fetch("/api/control", {
      method: "POST",
      headers: { "content-type": "application/json", "x-acp-dashboard-key": KEY || "" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) {
        result = r.ok ? { state: "ok", text: label + ": " + (j.message || "done") } : { state: "error", text: label + ": " + (j.error || r.status) };
        showResult();
        return j;
      });
    }, function (err) {
      result = { state: "error", text: label + ": " + err };
      showResult();
    });
  }
  function button(verb, label, enabled, body, ask) {
    return el("button", { "data-verb": verb, disabled: !enabled, onclick: function () {
      if (ask && !window.confirm(ask)) return;
      post(body(), label);
    } }, [label]);
  }
  var TERMINAL = ["completed", "cancelled"];
  function controls(v, productId) {
    var s = v.status, phase = s.phase;
    var bar = el("div", { id: "controls", class: "controls", "data-phase": phase });
    var id = { productId: productId };
    function plus(extra) { return function () { return Object.assign({}, id, extra); }; }
    bar.appendChild(button("pause", "Pause", phase === "executing", plus({ verb: "pause" })));
    bar.appendChild(button("resume", "Resume", phase === "paused" || phase === "failed", plus({ verb: "resume" })));
    bar.appendChild(button("confirm", "Confirm plan", phase === "awaiting_confirmation", plus({ verb: "confirm" })));
    bar.appendChild(button("checkpoint", "Checkpoint", phase === "executing" || phase === "paused", plus({ verb: "checkpoint" })));
    var select = el("select", { id: "rollback-checkpoint" });
    v.checkpoints.slice().reverse().forEach(function (c) {
      select.appendChild(el("option", { value: c.checkpointId, text: c.checkpointId + " (" + c.completed + "/" + c.total + ")" }));
    });
    bar.appendChild(select);
    bar.appendChild(button("rollback", "Roll back", v.checkpoints.length > 0 && phase !== "planning" && phase !== "awaiting_confirmation",
      function () { return Object.assign({}, id, { verb: "rollback", checkpointId: select.value }); },
      "Roll " + productId + " back to the chosen checkpoint? Work after it is set aside."));
    bar.appendChild(button("cancel", "Cancel", TERMINAL.indexOf(phase) < 0, plus({ verb: "cancel" }), "Cancel " + productId + " for good?"));
    bar.appendChild(button("merge", "Merge", phase === "completed" && !!s.integration, plus({ verb: "merge" }),
      "Merge " + productId + "'s branch into the branch checked out in its repository?"));
    bar.appendChild(el("span", { id: "control-result", class: "control-result " + result.state, "data-state": result.state, text: result.text }));
    return bar;
  }
  var answerBoxes = {};
  function taskControls(t, productId) {
    var box = el("div", { class: "controls", id: "task-controls" });
    var done = ["completed", "failed", "skipped", "cancelled"].indexOf(t.status) >= 0;
    box.appendChild(button("retry", "Retry task", done && !t.proposed, function () {
      return { verb: "retry", productId: productId, taskId: t.taskId };
    }, "Run " + t.taskId + " and everything downstream of it again?"));
    if (t.status === "waiting") {
      // The same element across redraws (the stream redraws the page while the user types).
      var text = answerBoxes[productId + "/" + t.taskId] || (answerBoxes[productId + "/" + t.taskId] = el("textarea", { id: "answer-text", rows: "2", placeholder: "Answer " + t.taskId + "'s question" }));
      var focused = document.activeElement === text;
      box.appendChild(text);
      box.appendChild(el("button", { "data-verb": "answer", onclick: function () {
        if (text.value.trim() === "") return;
        post({ verb: "answer", productId: productId, taskId: t.taskId, text: text.value }, "Answer");
      } }, ["Answer"]));
      if (focused) setTimeout(function () { text.focus(); }, 0);
    }
    return box;
  }
  function getJson(path) {
    return fetch(path).then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || String(r.status)); return j; }); });
  }
  function when(iso) { var d = new Date(iso); return isFinite(d) ? d.toISOString().slice(11, 19) : "-"; }
  function attempts(productId, t, into) {
    getJson("/api/products/" + encodeURIComponent(productId) + "/tasks/" + encodeURIComponent(t.taskId) + "/attempts").then(function (j) {
      while (into.firstChild) into.removeChild(into.firstChild);
      var table = el("table", { id: "attempts" }, [el("tr", {}, ["#", "Agent", "Started", "Ended", "Outcome", "Commit", "Output"].map(function (h) { return el("th", { text: h }); }))]);
      j.attempts.forEach(function (a) {
        table.appendChild(el("tr", { "data-attempt": String(a.attempt), "data-status": a.status }, [
          el("td", { text: String(a.attempt) }), el("td", { text: a.agent }), el("td", { text: a.startedAt ? when(a.startedAt) : "-" }),
          el("td", { text: a.endedAt ? when(a.endedAt) : "-" }), el("td", { text: a.status + (a.error ? ": " + a.error : "") }),
          el("td", { text: a.commit ? a.commit.slice(0, 10) : "-" }),
          el("td", {}, [el("details", {}, [el("summary", { text: a.outputLength + " chars" }), el("pre", { text: a.outputTail })])])
        ]));
      });
      if (j.attempts.length === 0) table.appendChild(el("tr", {}, [el("td", { colspan: "7", class: "muted", text: "no attempt yet" })]));
      into.appendChild(table);
    }, function (err) { into.textContent = String(err.message || err); });
  }
  function diff(productId, taskId, into) {
    into.textContent = "Loading the diff…";
    var path = "/api/products/" + encodeURIComponent(productId) + "/diff" + (taskId ? "?task=" + encodeURIComponent(taskId) : "");
    getJson(path).then(function (j) {
      into.textContent = "";
      into.setAttribute("data-what", j.what);
      if (j.diff === "") { into.textContent = "No change in " + j.what + "."; return; }
      if (V && V.diffHtml) into.innerHTML = V.diffHtml(j.diff, { drawFileList: true, outputFormat: "line-by-line", matching: "lines" });
      else into.appendChild(el("pre", { text: j.diff }));
    }, function (err) { into.textContent = String(err.message || err); into.setAttribute("data-what", "none"); });
  }
  var BAR_COLOURS = { run: ["#cfe2ff", "#0d6efd"], wait: ["#fff3cd", "#ffc107"] };
  var OUTCOME = { completed: ["#d1e7dd", "#198754"], failed: ["#f8d7da", "#dc3545"], cancelled: ["#e2e3e5", "#6c757d"] };
  function timeline(productId, into, onSelect) {
    getJson("/api/products/" + encodeURIComponent(productId) + "/timeline").then(function (j) {
      while (into.firstChild) into.removeChild(into.firstChild);
      var t0 = Date.parse(j.start || j.now), t1 = Math.max(Date.parse(j.now), t0 + 1000);
      var width = Math.max(600, (into.clientWidth || 900) - 10), label = 120, row = 26, height = 30 + row * j.seats.length;
      var scale = (width - label - 10) / (t1 - t0);
      var box = svg("svg", { id: "timeline", width: String(width), height: String(height) });
      var defs = svg("defs", {});
      var pat = svg("pattern", { id: "hatch", width: "6", height: "6", patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
      pat.appendChild(svg("rect", { width: "6", height: "6", fill: "#fff3cd" }));
      pat.appendChild(svg("line", { x1: "0", y1: "0", x2: "0", y2: "6", stroke: "#ffc107", "stroke-width": "3" }));
      defs.appendChild(pat);
      box.appendChild(defs);
      for (var s = 0; s <= 4; s++) {
        var x = label + (width - label - 10) * s / 4;
        box.appendChild(svg("line", { x1: String(x), y1: "18", x2: String(x), y2: String(height), stroke: "#dee2e6" }));
        var tick = svg("text", { x: String(x + 2), y: "12", class: "tick" });
        tick.textContent = when(new Date(t0 + (t1 - t0) * s / 4).toISOString());
        box.appendChild(tick);
      }
      j.seats.forEach(function (seat, i) {
        var y = 22 + i * row;
        var name = svg("text", { x: "4", y: String(y + 15), class: "seat" });
        name.textContent = seat.instanceId + " (" + seat.agent + ")";
        box.appendChild(name);
        seat.bars.forEach(function (b) {
          var from = Date.parse(b.from), to = b.to ? Date.parse(b.to) : t1;
          var colours = b.kind === "wait" ? BAR_COLOURS.wait : (b.to ? (OUTCOME[b.status] || BAR_COLOURS.run) : BAR_COLOURS.run);
          var r = svg("rect", { class: "bar", "data-task-id": b.taskId, "data-kind": b.kind, "data-status": b.status, x: String(label + (from - t0) * scale), y: String(y),
            width: String(Math.max(3, (to - from) * scale)), height: String(row - 6), rx: "3", fill: b.kind === "wait" ? "url(#hatch)" : colours[0], stroke: colours[1] });
          var tip = svg("title", {});
          tip.textContent = b.taskId + " attempt " + b.attempt + " " + (b.kind === "wait" ? "waiting" : "running") + " " + when(b.from) + "–" + (b.to ? when(b.to) : "now") + " → " + b.status;
          r.appendChild(tip);
          r.addEventListener("click", function () { onSelect(b.taskId); });
          box.appendChild(r);
          var w = (to - from) * scale;
          if (w > 40) {
            var tl = svg("text", { x: String(label + (from - t0) * scale + 4), y: String(y + 14), class: "bar-label" });
            tl.textContent = b.taskId;
            box.appendChild(tl);
          }
        });
      });
      if (j.seats.length === 0) into.appendChild(el("p", { class: "muted", text: "Nothing has run yet." }));
      else into.appendChild(box);
    }, function (err) { into.textContent = String(err.message || err); });
  }
  function zoomable(box, viewport, L, state) {
    if (!V || !V.zoom) return { fit: function () {}, reset: function () {} };
    var behaviour = V.zoom().scaleExtent([0.05, 4]).on("zoom", function (e) {
      state.transform = e.transform;
      viewport.setAttribute("transform", e.transform.toString());
    });
    var sel = V.select(box);
    sel.call(behaviour).on("dblclick.zoom", null);
    function fit() {
      var w = box.clientWidth || 800, h = box.clientHeight || 600;
      var k = Math.min(w / L.width, h / L.height, 1.5) * 0.98;
      sel.call(behaviour.transform, V.zoomIdentity.translate((w - L.width * k) / 2, (h - L.height * k) / 2).scale(k));
    }
    function reset() { sel.call(behaviour.transform, V.zoomIdentity); }
    if (state.transform) sel.call(behaviour.transform, state.transform);
    else if (L.width > (box.clientWidth || 800) || L.height > (box.clientHeight || 600)) fit();
    else reset();
    return { fit: fit, reset: reset };
  }
  window.acpViews = { controls: controls, taskControls: taskControls, post: post, attempts: attempts, diff: diff, timeline: timeline, zoomable: zoomable };
})();
`;
