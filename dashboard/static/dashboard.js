// KQS dashboard: polls /api/summary and draws every chart as hand-written SVG.
// No framework, no build step, nothing fetched from the internet.
"use strict";

const POLL_MS = 3000;
const MIN_SPAN_MS = 5 * 60 * 1000;
const W = 420;
const H = 170;
const PAD = { left: 40, right: 8, top: 8, bottom: 20 };
const SVG_NS = "http://www.w3.org/2000/svg";
const C = {
  visible: "#2f7ed8",
  inflight: "#f0a202",
  delayed: "#9b59b6",
  sent: "#2f7ed8",
  received: "#27ae60",
  deleted: "#e4572e",
  empty: "#7f8c8d",
  age: "#c0392b",
  arrivals: "#e4572e",
  avg: "#2f7ed8",
  max: "#c0392b",
  attr: "#16a085",
};

// -- formatting -------------------------------------------------------------------------

function compact(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function duration(s) {
  if (s === null || s === undefined) return "–";
  const one = (v) => v.toFixed(1).replace(/\.0$/, "");
  if (s === 0) return "0";
  if (s < 60) return (s < 10 ? one(s) : s.toFixed(0)) + " s";
  if (s < 3600) return one(s / 60) + " min";
  if (s < 86400) return one(s / 3600) + " h";
  return one(s / 86400) + " d";
}

function clock(ms, seconds) {
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  const hm = two(d.getHours()) + ":" + two(d.getMinutes());
  return seconds ? hm + ":" + two(d.getSeconds()) : hm;
}

function niceStep(max, ticks) {
  const raw = max / ticks;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  const step = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  return step * mag;
}

// -- SVG primitives ---------------------------------------------------------------------

function el(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function html(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Seconds-valued axes (ages) step by whole seconds, minutes or hours, not by 2.5 or 50.
const DURATION_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400];

function frame(domain, yMax, yFormat) {
  const svg = el("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, role: "img" });
  const [t0, t1] = domain;
  const max = yMax > 0 ? yMax : 1;
  const step = yFormat === duration
    ? DURATION_STEPS.find((s) => max / s <= 4) || 86400 * Math.ceil(max / 4 / 86400)
    : niceStep(max, 4);
  const top = Math.max(step * Math.ceil(max / step), step);
  const x = (t) => PAD.left + ((t - t0) / Math.max(t1 - t0, 1)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  for (let v = 0; v <= top + step / 2; v += step) {
    svg.appendChild(el("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    svg.appendChild(el("text", { class: "axis", x: PAD.left - 4, y: y(v) + 3, "text-anchor": "end" }, yFormat(v)));
  }
  const tickMs = niceTimeStep(t1 - t0);
  for (let t = Math.ceil(t0 / tickMs) * tickMs; t <= t1; t += tickMs) {
    if (x(t) > W - 14) continue; // a label there would be cut off at the edge
    svg.appendChild(el("text", { class: "axis", x: x(t), y: H - 5, "text-anchor": "middle" }, clock(t)));
  }
  return { svg, x, y };
}

function niceTimeStep(spanMs) {
  const minutes = [1, 2, 5, 10, 15, 30, 60, 120];
  for (const m of minutes) if (spanMs / (m * 60000) <= 6) return m * 60000;
  return 240 * 60000;
}

function noData(svg) {
  svg.appendChild(el("text", { class: "nodata", x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet"));
}

// A chart: `series` = [{name, color, points: [[t, v], ...]}]; kind "line", "area" (stacked)
// or "bar" (one bar per window per series, side by side).
function chart(title, series, options) {
  const box = html("div", "chart");
  box.dataset.chart = options.id;
  box.appendChild(html("h4", null, title));
  const legend = html("div", "legend");
  for (const s of series) {
    const item = html("span");
    const swatch = html("i");
    swatch.style.background = s.color;
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(s.name));
    legend.appendChild(item);
  }
  box.appendChild(legend);
  const kind = options.kind || "line";
  let yMax = 0;
  if (kind === "area") {
    const totals = new Map();
    for (const s of series) for (const [t, v] of s.points) totals.set(t, (totals.get(t) || 0) + v);
    for (const v of totals.values()) yMax = Math.max(yMax, v);
  } else {
    for (const s of series) for (const [, v] of s.points) yMax = Math.max(yMax, v);
  }
  const { svg, x, y } = frame(options.domain, yMax, options.yFormat || compact);
  svg.setAttribute("aria-label", title);
  const pointCount = series.reduce((n, s) => n + s.points.length, 0);
  box.dataset.points = String(pointCount);
  if (pointCount === 0) noData(svg);
  else if (kind === "area") drawStacked(svg, series, x, y);
  else if (kind === "bar") drawBars(svg, series, x, y, options.windowMs || 60000);
  else drawLines(svg, series, x, y);
  if (pointCount > 0) hover(svg, series, x, options.yFormat || compact);
  box.appendChild(svg);
  return box;
}

// The chart under the mouse, kept across the re-render of every poll so its tip stays up.
let pointer = null;

function chartKey(svg) {
  const card = svg.closest(".card");
  return `${card.dataset.queue || ""}|${card.dataset.dlq || ""}|${svg.closest(".chart").dataset.chart}`;
}

function restorePointer() {
  if (!pointer) return;
  for (const svg of document.querySelectorAll("svg.plot")) {
    if (chartKey(svg) === pointer.key) {
      svg.dispatchEvent(new MouseEvent("mousemove", { clientX: pointer.clientX, clientY: pointer.clientY }));
    }
  }
}

// A guide line and the values of every series at the point in time nearest the pointer.
function hover(svg, series, x, yFormat) {
  const times = [...new Set(series.flatMap((s) => s.points.map(([t]) => t)))].sort((a, b) => a - b);
  const values = series.map((s) => new Map(s.points));
  const guide = el("line", { class: "guide", y1: PAD.top, y2: H - PAD.bottom, visibility: "hidden" });
  const back = el("rect", { class: "tip-back", rx: 3, visibility: "hidden" });
  const tip = el("text", { class: "tip", y: PAD.top + 12, visibility: "hidden" });
  svg.append(guide, back, tip);
  const show = (visible) => [guide, back, tip].forEach((n) => n.setAttribute("visibility", visible ? "visible" : "hidden"));
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const px = ((event.clientX - box.left) * W) / box.width;
    let t = times[0];
    for (const candidate of times) if (Math.abs(x(candidate) - px) < Math.abs(x(t) - px)) t = candidate;
    guide.setAttribute("x1", x(t));
    guide.setAttribute("x2", x(t));
    const parts = series
      .map((s, i) => (values[i].has(t) ? `${s.name} ${yFormat(values[i].get(t))}` : null))
      .filter((part) => part !== null);
    tip.textContent = `${clock(t, true)}  ${parts.join(" · ")}`;
    const right = x(t) > W / 2;
    tip.setAttribute("x", right ? x(t) - 6 : x(t) + 6);
    tip.setAttribute("text-anchor", right ? "end" : "start");
    show(true);
    const text = tip.getBBox();
    back.setAttribute("x", text.x - 3);
    back.setAttribute("y", text.y - 2);
    back.setAttribute("width", text.width + 6);
    back.setAttribute("height", text.height + 4);
    pointer = { key: chartKey(svg), clientX: event.clientX, clientY: event.clientY };
  });
  svg.addEventListener("mouseleave", () => {
    show(false);
    pointer = null;
  });
}

function drawLines(svg, series, x, y) {
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join("");
    svg.appendChild(el("path", { class: "series", d, fill: "none", stroke: s.color, "stroke-width": 2, "data-series": s.name, "data-points": s.points.length }));
    if (s.points.length === 1) {
      const [t, v] = s.points[0];
      svg.appendChild(el("circle", { cx: x(t), cy: y(v), r: 3, fill: s.color }));
    }
  }
}

function drawStacked(svg, series, x, y) {
  const times = [...new Set(series.flatMap((s) => s.points.map(([t]) => t)))].sort((a, b) => a - b);
  const base = new Map(times.map((t) => [t, 0]));
  for (const s of series) {
    const values = new Map(s.points);
    const lower = times.map((t) => [t, base.get(t)]);
    const upper = times.map((t) => [t, base.get(t) + (values.get(t) || 0)]);
    upper.forEach(([t, v]) => base.set(t, v));
    const path = [
      ...upper.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`),
      ...lower.reverse().map(([t, v]) => `L${x(t).toFixed(1)},${y(v).toFixed(1)}`),
      "Z",
    ].join("");
    svg.appendChild(el("path", { class: "series", d: path, fill: s.color, "fill-opacity": 0.75, stroke: s.color, "stroke-width": 1, "data-series": s.name, "data-points": s.points.length }));
  }
}

function drawBars(svg, series, x, y, windowMs) {
  const n = series.length;
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const width = Math.max((x(windowMs) - x(0)) * 0.8, 2);
    const d = s.points
      .map(([t, v]) => {
        const left = x(t) + (width / n) * i + (x(windowMs) - x(0)) * 0.1;
        const w = Math.max(width / n, 1).toFixed(1);
        return `M${left.toFixed(1)},${y(0).toFixed(1)}V${y(v).toFixed(1)}h${w}V${y(0).toFixed(1)}Z`;
      })
      .join("");
    svg.appendChild(el("path", { class: "series", d, fill: s.color, "data-series": s.name, "data-points": s.points.length }));
  });
}

// Horizontal bars of (label, count), for the top attribute values.
function barList(title, items, color, id) {
  const box = html("div", "chart");
  box.dataset.chart = id;
  box.appendChild(html("h4", null, title));
  box.appendChild(html("div", "legend"));
  const rowH = 22;
  const svg = el("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, role: "img" });
  const shown = items.slice(0, Math.floor((H - 4) / rowH));
  box.dataset.points = String(shown.length);
  const max = Math.max(1, ...shown.map((a) => a.count));
  shown.forEach((a, i) => {
    const top = 4 + i * rowH;
    const w = ((W - 215) * a.count) / max;
    svg.appendChild(el("text", { class: "bar-label", x: 0, y: top + 15 }, truncate(`${a.name}=${a.value}`, 22)));
    svg.appendChild(el("path", { class: "series", d: `M160,${top + 3}h${w.toFixed(1)}v14h${(-w).toFixed(1)}Z`, fill: color, "data-series": `${a.name}=${a.value}`, "data-points": 1 }));
    svg.appendChild(el("text", { class: "axis", x: 164 + w, y: top + 14 }, compact(a.count)));
  });
  if (!shown.length) noData(svg);
  box.appendChild(svg);
  return box;
}

function truncate(s, n) {
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// -- cards ------------------------------------------------------------------------------

function pts(rows, key, scale) {
  return rows.filter((r) => r[key] !== null && r[key] !== undefined).map((r) => [r.t, r[key] * (scale || 1)]);
}

// From the first point (at least MIN_SPAN_MS back) to now, or to the end of the current window.
function domainOf(rows, now) {
  const first = rows.length ? Math.min(...rows.map((r) => r.t)) : now - MIN_SPAN_MS;
  const last = Math.max(now, ...rows.map((r) => r.end || r.t));
  return [Math.min(first, now - MIN_SPAN_MS), last];
}

function figure(label, value) {
  const node = html("span", "figure", label);
  node.appendChild(html("b", null, value));
  return node;
}

function head(title, account, figures, totals) {
  const node = html("div", "card-head");
  const h = html("h3", null, title);
  h.appendChild(html("span", "account", account));
  node.appendChild(h);
  const list = html("div", "figures");
  for (const [label, value] of figures) list.appendChild(figure(label, value));
  node.appendChild(list);
  if (totals) {
    // Counts over the range the charts show, so they stay meaningful once traffic stops.
    const sums = html("div", "figures totals");
    sums.appendChild(html("span", "totals-label", totals.label));
    for (const [label, value] of totals.figures) sums.appendChild(figure(label, value));
    node.appendChild(sums);
  }
  return node;
}

function totalsLabel(sinceMs) {
  return sinceMs === null || sinceMs === undefined ? "Totals" : `Totals since ${clock(sinceMs)}`;
}

function queueCard(q, now) {
  const card = html("div", "card queue");
  card.dataset.queue = q.queue;
  const cur = q.current || {};
  card.appendChild(
    head(q.queue, q.account, [
      ["Visible", compact(cur.visible)],
      ["In flight", compact(cur.not_visible)],
      ["Delayed", compact(cur.delayed)],
      ["Oldest", duration(cur.oldest_age_s)],
      ["Sent/s", compact(q.rates.sent_per_s)],
      ["Received/s", compact(q.rates.received_per_s)],
      ["Deleted/s", compact(q.rates.deleted_per_s)],
      ["Empty receives/s", compact(q.rates.empty_receives_per_s)],
    ], {
      label: totalsLabel(q.totals_since_ms),
      figures: [
        ["Sent", compact(q.totals.sent)],
        ["Received", compact(q.totals.received)],
        ["Deleted", compact(q.totals.deleted)],
        ["Moved to DLQ", compact(q.totals.moved_to_dlq)],
        ...(q.is_dlq ? [["DLQ arrivals", compact(q.totals.dlq_arrivals)]] : []),
      ],
    })
  );
  const domain = domainOf([...q.series, ...q.depth], now);
  const charts = html("div", "charts");
  charts.appendChild(
    chart("Depth (messages)", [
      { name: "visible", color: C.visible, points: pts(q.depth, "visible") },
      { name: "in flight", color: C.inflight, points: pts(q.depth, "not_visible") },
      { name: "delayed", color: C.delayed, points: pts(q.depth, "delayed") },
    ], { id: "depth", kind: "area", domain })
  );
  charts.appendChild(
    chart("Messages per second", [
      { name: "sent", color: C.sent, points: pts(q.series, "sent_per_s") },
      { name: "received", color: C.received, points: pts(q.series, "received_per_s") },
      { name: "deleted", color: C.deleted, points: pts(q.series, "deleted_per_s") },
    ], { id: "rates", domain })
  );
  charts.appendChild(
    chart("Empty receives per minute", [
      { name: "empty receives", color: C.empty, points: pts(q.series, "empty_receives") },
    ], { id: "empty", kind: "bar", domain })
  );
  charts.appendChild(
    chart("Age of oldest message", [
      { name: "oldest", color: C.age, points: pts(q.depth, "oldest_age_s") },
    ], { id: "age", domain, yFormat: duration })
  );
  card.appendChild(charts);
  return card;
}

function dlqCard(d, now) {
  const card = html("div", "card dlq");
  card.dataset.dlq = d.dlq;
  card.appendChild(
    head(`${d.dlq} ← ${d.source_queue}`, d.account, [
      ["Receives at move, avg", compact(d.receive_count_avg)],
      ["max", compact(d.receive_count_max)],
      ["Oldest at move", duration(d.age_at_move_max_s)],
    ], {
      label: totalsLabel(d.series.length ? d.series[0].t : null),
      figures: [["Arrivals", compact(d.total_arrivals)]],
    })
  );
  const domain = domainOf(d.series, now);
  const charts = html("div", "charts");
  charts.appendChild(
    chart("Arrivals per minute", [
      { name: "moved to DLQ", color: C.arrivals, points: pts(d.series, "arrivals") },
    ], { id: "arrivals", kind: "bar", domain })
  );
  charts.appendChild(
    chart("Receive count at move", [
      { name: "average", color: C.avg, points: pts(d.series, "receive_count_avg") },
      { name: "maximum", color: C.max, points: pts(d.series, "receive_count_max") },
    ], { id: "receive-count", domain })
  );
  charts.appendChild(
    chart("Age at move", [
      { name: "average", color: C.avg, points: pts(d.series, "age_at_move_avg_s") },
      { name: "maximum", color: C.max, points: pts(d.series, "age_at_move_max_s") },
    ], { id: "age-at-move", domain, yFormat: duration })
  );
  // Exact counts over the range shown; records from before Spark carried every value's
  // count only hold each minute's top values, and then the list says it is approximate.
  const attributesTitle = d.top_attributes_exact ? "Top attribute values" : "Top attribute values (approximate)";
  charts.appendChild(barList(attributesTitle, d.top_attributes, C.attr, "attributes"));
  card.appendChild(charts);
  return card;
}

// -- polling ----------------------------------------------------------------------------

function render(summary) {
  const now = summary.now_ms;
  const queues = document.getElementById("queues");
  const dlqs = document.getElementById("dlqs");
  queues.replaceChildren(
    ...(summary.queues.length
      ? summary.queues.map((q) => queueCard(q, now))
      : [html("p", "empty", "No queue metrics yet: run kqs analytics and send some messages.")])
  );
  dlqs.replaceChildren(
    ...(summary.dlqs.length ? summary.dlqs.map((d) => dlqCard(d, now)) : [html("p", "empty", "No dead-letter moves yet.")])
  );
  document.getElementById("shown").textContent =
    summary.queue_count > summary.queues.length
      ? `the ${summary.queues.length} busiest of ${summary.queue_count} queues (last ${BUSY_MINUTES} minutes)`
      : "";
  const status = document.getElementById("status");
  const feed = summary.feed;
  const records = Object.values(feed.records).reduce((a, b) => a + b, 0);
  status.className = feed.error ? "status error" : "status";
  status.textContent =
    `Kafka ${feed.bootstrap} · ${compact(records)} records · updated ${clock(now, true)}` +
    (feed.error ? ` · ${feed.error}` : "");
  document.body.dataset.updated = String(now);
  restorePointer();
}

// The page shows the SHOWN_QUEUES busiest queues whose names contain the search text: with
// 10,000 queues, the server summarises only those (GET /api/summary?limit=&q=).
const SHOWN_QUEUES = 50;
const BUSY_MINUTES = 5;
let pollTimer = null;
let polling = false; // one request at a time; a search typed meanwhile asks again at once
let again = false;

function summaryUrl() {
  const search = document.getElementById("search").value.trim();
  return `/api/summary?limit=${SHOWN_QUEUES}&q=${encodeURIComponent(search)}`;
}

document.getElementById("search").addEventListener("input", () => {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(poll, 300);
});

async function poll() {
  clearTimeout(pollTimer);
  if (polling) {
    again = true;
    return;
  }
  polling = true;
  try {
    const response = await fetch(summaryUrl(), { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(await response.json());
  } catch (error) {
    const status = document.getElementById("status");
    status.className = "status error";
    status.textContent = `dashboard server unreachable (${error.message}); retrying`;
  } finally {
    polling = false;
    pollTimer = setTimeout(poll, again ? 0 : POLL_MS);
    again = false;
  }
}

poll();
