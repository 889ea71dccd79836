// The workflow page, live: it follows the workflow's event stream
// (GET /api/v1/workflows/{id}/events), draws the timeline (one row per step
// or map, one bar per attempt, backoffs and waits between them), fills each
// step's call inspector and the text running steps stream, and refreshes
// the page's states from the API as steps change. No reload, no CDN.
(function () {
  "use strict";
  const live = document.getElementById("live");
  if (!live) return;
  const wf = live.dataset.wf;
  const order = JSON.parse(live.dataset.steps || "[]");
  const svgNS = "http://www.w3.org/2000/svg";
  const events = [];
  let ended = false;
  let refreshTimer = null;

  // shown shows a user's text with each bidirectional formatting character
  // (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) as its \u
  // escape, as the pages' own writer does: text from the event log or the
  // status (streamed answers, outputs) cannot reorder what is shown.
  const bidi = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;
  const shown = (s) => String(s).replace(bidi, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

  // a map instance "m[3]" belongs to its map's row
  const rowOf = (step) => (step || "").replace(/\[\d+\]$/, "");

  function el(tag, attrs, text) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = shown(text);
    return e;
  }

  // attempts turns the log into bars: per step (instance), each attempt
  // from its step.started to what ended it; gaps between attempts are
  // backoffs, a step.waiting opens a wait.
  function attempts() {
    const open = {}; // step -> the bar being drawn
    const bars = [], gaps = [];
    const close = (step, at, outcome) => {
      const b = open[step];
      if (!b) return;
      b.end = at; b.outcome = outcome;
      delete open[step];
    };
    for (const e of events) {
      const at = Date.parse(e.at);
      switch (e.type) {
        case "step.started": {
          close(e.step, at, "lost"); // a worker that died mid-attempt
          const last = bars.filter((b) => b.step === e.step).pop();
          if (last && last.outcome === "failed") gaps.push({ step: e.step, row: rowOf(e.step), start: last.end, end: at, kind: "backoff" });
          const b = { step: e.step, row: rowOf(e.step), attempt: e.attempt, start: at, end: null, outcome: "running", target: "" };
          open[e.step] = b; bars.push(b);
          break;
        }
        case "llm.call":
          if (open[e.step] && !e.class) open[e.step].target = e.target;
          break;
        case "step.failed": close(e.step, at, "failed"); break;
        case "step.throttled":
          close(e.step, at, "done");
          open[e.step] = { step: e.step, row: rowOf(e.step), start: at, end: null, outcome: "waiting", target: e.reason || "throttled" };
          bars.push(open[e.step]);
          break;
        case "step.waiting":
          close(e.step, at, "done");
          open[e.step] = { step: e.step, row: rowOf(e.step), start: at, end: null, outcome: "waiting", target: e.reason || "waits" };
          bars.push(open[e.step]);
          break;
        case "step.done": case "step.degraded": case "step.dead": case "step.canceled": {
          const b = open[e.step];
          if (b && e.target) b.target = e.target;
          close(e.step, at, e.type.slice(5));
          break;
        }
        case "workflow.ended":
          for (const s in open) close(s, at, open[s].outcome === "waiting" ? "canceled" : "canceled");
          break;
      }
    }
    return { bars, gaps };
  }

  function drawTimeline() {
    const svg = document.getElementById("timeline");
    if (!svg || events.length === 0) return;
    const { bars, gaps } = attempts();
    const rows = order.slice();
    for (const b of bars) if (!rows.includes(b.row)) rows.push(b.row);
    const t0 = Date.parse(events[0].at);
    const last = Date.parse(events[events.length - 1].at);
    const t1 = Math.max(last, ended ? last : Date.now(), t0 + 1000);
    const label = 140, width = 900, rowH = 24, plot = width - label - 10;
    const x = (t) => label + ((t - t0) / (t1 - t0)) * plot;
    svg.setAttribute("viewBox", `0 0 ${width} ${rows.length * rowH + 20}`);
    svg.setAttribute("height", rows.length * rowH + 20);
    svg.replaceChildren();
    rows.forEach((r, i) => {
      const y = i * rowH;
      svg.appendChild(el("text", { x: 4, y: y + 16, class: "row" }, r));
      svg.appendChild(el("line", { x1: label, x2: width - 10, y1: y + rowH - 2, y2: y + rowH - 2, class: "grid" }));
    });
    for (const g of gaps) {
      const y = rows.indexOf(g.row) * rowH + 12;
      svg.appendChild(el("line", { x1: x(g.start), x2: x(g.end), y1: y, y2: y, class: "gap " + g.kind, "data-step": g.step }));
    }
    for (const b of bars) {
      const y = rows.indexOf(b.row) * rowH + 4;
      const end = b.end === null ? t1 : b.end;
      const w = Math.max(x(end) - x(b.start), 2);
      const r = el("rect", { x: x(b.start), y: y, width: w, height: rowH - 10, rx: 2,
        class: (b.outcome === "waiting" ? "wait " : "attempt ") + b.outcome, "data-step": b.step, "data-attempt": b.attempt || 0 });
      r.appendChild(el("title", {}, `${b.step} attempt ${b.attempt || "-"}: ${b.outcome}${b.target ? " (" + b.target + ")" : ""}, ${((end - b.start) / 1000).toFixed(2)}s`));
      svg.appendChild(r);
      if (b.target && w > 60) svg.appendChild(el("text", { x: x(b.start) + 3, y: y + 10, class: "target" }, b.target));
    }
    svg.appendChild(el("text", { x: label, y: rows.length * rowH + 16, class: "axis" }, "0s"));
    svg.appendChild(el("text", { x: width - 60, y: rows.length * rowH + 16, class: "axis" }, ((t1 - t0) / 1000).toFixed(1) + "s"));
  }

  // the call inspector: every call, tool turn and durable call of a step
  function inspect(e) {
    if (!["llm.call", "tool.turn", "do.call", "step.failed", "step.stream_reset"].includes(e.type)) return;
    const row = rowOf(e.step);
    let box = document.getElementById("calls-" + row);
    if (!box) {
      box = document.createElement("details");
      box.id = "calls-" + row;
      box.className = "calls";
      const s = document.createElement("summary");
      s.textContent = row;
      const t = document.createElement("table");
      t.innerHTML = "<tr><th>time</th><th>step</th><th>attempt</th><th>what</th><th>target / tools</th><th>key</th><th>latency</th><th>tokens</th><th>outcome</th></tr>";
      box.append(s, t);
      document.getElementById("inspector").appendChild(box);
    }
    const tr = document.createElement("tr");
    tr.className = "call " + e.type.replace(".", "-");
    const cells = [new Date(e.at).toLocaleTimeString(), e.step, e.attempt || "", e.type,
      e.type === "tool.turn" ? (e.tools || []).join(", ") : (e.type === "do.call" ? e.name : (e.route ? e.route + " → " : "") + (e.target || "")),
      e.key || "", e.latency_ms !== undefined ? e.latency_ms + "ms" : "",
      e.prompt_tokens || e.completion_tokens ? (e.prompt_tokens || 0) + "/" + (e.completion_tokens || 0) : "",
      e.class || e.error || e.reason || (e.type === "step.stream_reset" ? "text reset" : "ok")];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.appendChild(td);
    }
    box.querySelector("table").appendChild(tr);
    box.dataset.n = (Number(box.dataset.n || 0) + 1).toString();
    box.querySelector("summary").textContent = row + ": " + box.dataset.n + " entries";
  }

  // streamed text, per step, since its last reset
  function stream(e) {
    if (e.type !== "step.delta" && e.type !== "step.stream_reset") return;
    let pre = document.getElementById("stream-" + e.step);
    if (!pre) {
      const box = document.createElement("div");
      box.className = "stream";
      const h = document.createElement("b");
      h.textContent = e.step;
      pre = document.createElement("pre");
      pre.id = "stream-" + e.step;
      box.append(h, pre);
      document.getElementById("streams").appendChild(box);
    }
    if (e.type === "step.stream_reset") pre.textContent = "";
    else pre.textContent += shown(e.text);
  }

  // the page's states, from the API: the workflow's and each step's row
  function refresh() {
    refreshTimer = null;
    fetch("/api/v1/workflows/" + encodeURIComponent(wf), { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((w) => {
        if (!w) return;
        const st = document.getElementById("state");
        if (st) { st.textContent = w.state; st.className = "st " + w.state; }
        if (["completed", "failed", "canceled", "timed_out"].includes(w.state)) {
          const cancel = document.querySelector('form[action$="/cancel"]');
          if (cancel) cancel.remove();
        }
        for (const s of w.steps || []) {
          const node = document.querySelector('.graph a.node[href="#step-' + CSS.escape(s.id) + '"]');
          if (node) {
            node.className = "node st " + s.state;
            const small = node.querySelector("small");
            if (small && small.firstChild) small.firstChild.textContent = s.state;
          }
          const row = document.getElementById("step-" + s.id);
          if (!row) continue;
          const td = row.children;
          td[2].className = "st " + s.state;
          td[2].firstChild.textContent = s.state;
          td[3].textContent = s.attempts;
          td[4].textContent = s.target || "";
          td[5].textContent = (s.usage ? s.usage.prompt_tokens : 0) + "/" + (s.usage ? s.usage.completion_tokens : 0);
          let out = td[7].querySelector("pre.out");
          if (s.output && !out) { out = document.createElement("pre"); out.className = "out"; td[7].prepend(out); }
          if (out) out.textContent = shown(s.output);
        }
      })
      .catch(() => {});
  }
  const later = () => { if (!refreshTimer) refreshTimer = setTimeout(refresh, 150); };
  // one drawing a frame, however many events a frame brings (a history
  // of thousands arrives at once)
  let drawPending = false;
  const redraw = () => {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => { drawPending = false; drawTimeline(); });
  };

  const src = new EventSource("/api/v1/workflows/" + encodeURIComponent(wf) + "/events");
  const onEvent = (m) => {
    const e = JSON.parse(m.data);
    events.push(e);
    inspect(e);
    stream(e);
    if (e.type.startsWith("step.") && e.type !== "step.delta" || e.type.startsWith("workflow.")) later();
    redraw();
  };
  for (const t of ["workflow.submitted", "workflow.rerun", "workflow.ended", "step.ready", "step.started", "step.failed",
    "step.waiting", "step.throttled", "step.done", "step.degraded", "step.dead", "step.canceled", "llm.call", "tool.turn", "do.call",
    "step.delta", "step.stream_reset", "log.truncated"]) src.addEventListener(t, onEvent);
  src.addEventListener("end", () => { ended = true; src.close(); later(); redraw(); requestAnimationFrame(() => { live.dataset.live = "ended"; }); });
  src.addEventListener("error", () => { if (ended) src.close(); });
  setInterval(() => { if (!ended) drawTimeline(); }, 1000); // running bars grow
  live.dataset.live = "following";
})();
