// The GPUDIAG dashboard: an ES module TensorBoard loads in its plugin iframe (render()).
// Plain DOM and SVG, no library, nothing fetched but this plugin's own routes
// (./runs, ./run, ./diff, ./style.css: relative to the iframe's base, /data/plugin/gpudiag/).
// The first screen answers, per run: which devices worked, why a step is as slow as it is
// (and the line to change), is it learning, did more devices help; then every finding.
// A `gpudiag try` run: its fixes measured first (tried.js), no card it has nothing for.

import { triedCard } from "./tried.js";

const POLL_MS = 5000; // a running run is read again this often (TensorBoard: ~30 s)
// the colours of gpudiag.tb.breakdown's picture; the parts and their order come from the
// JSON (the parts gpudiag.rundir.records declares), a part without a colour here gets grey
const PART_COLORS = {
  compute: "#2e7d32", communication: "#6a1b9a", copy: "#8d6e63", input: "#f9a825",
  host: "#1565c0", idle: "#bdbdbd",
};
const partColor = (part) => PART_COLORS[part] || "#757575";
const SVG = "http://www.w3.org/2000/svg";
const state = { runs: [], current: null, other: null, timer: null, view: null, shown: 0 };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

async function getJson(path) {
  const resp = await fetch(path, { headers: { "X-XSRF-Protected": "1" } });
  const data = await resp.json();
  if (!resp.ok) throw new Error(data.error || `${path}: HTTP ${resp.status}`);
  return data;
}

function runLabel(r) {
  const mark = r.failed_before_start ? "  [failed before its work started]"
    : r.status === "running" ? "  [running]" : r.status === "interrupted"
      ? "  [interrupted]" : r.status === "unreadable" ? `  [unreadable: ${r.reason}]` : "";
  return `${r.id}${mark}`;
}

function section(key, title, ...body) {
  return el("section", { class: `card ${key}`, "data-question": key },
    el("h2", {}, title), ...body);
}

// ---------------------------------------------------------------- (a) devices
function sparkline(points, label) {
  // 0-100 % over the sampled time; a 2 px margin keeps a flat 0 % line inside the frame
  const w = 120, h = 36, pad = 2;
  if (!points || points.length < 2) return el("span", { class: "muted" }, "no samples");
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const xy = points.map(([t, v]) => `${(((t - t0) / ((t1 - t0) || 1)) * w).toFixed(1)},` +
    `${(h - pad - (Math.max(0, Math.min(100, v)) / 100) * (h - 2 * pad)).toFixed(1)}`);
  return svg("svg", { width: w, height: h, class: "spark", role: "img", "aria-label": label },
    svg("title", {}, label),
    svg("rect", { x: 0, y: 0, width: w, height: h, class: "spark-frame" }),
    svg("polyline", { points: xy.join(" "), fill: "none", stroke: "#1565c0",
      "stroke-width": 1.5 }));
}

function devicesCard(d, title) {
  const body = [];
  if (d.no_gpu) body.push(el("p", { class: "nogpu" }, d.no_gpu.replace(/^devices: /, "")));
  const rows = d.lanes.map((lane) => {
    const mean = lane.util_mean === undefined || lane.util_mean === null ? ""
      : ` mean ${Math.round(lane.util_mean)}%` + (lane.sm_util_mean === null ? ""
        : `, SM ${Math.round(lane.sm_util_mean)}% (GPM)`);
    const activity = lane.activity ? el("span", { class: `activity ${lane.activity}` },
      ` ${lane.activity}`) : "";
    return el("tr", { class: `lane ${lane.state.replace(/ /g, "-")}`, "data-device": lane.name },
      el("td", { class: "name" }, lane.name,
        lane.model ? [el("br"), el("small", { class: "muted" }, lane.model)] : null),
      el("td", {}, el("span", { class: `badge ${lane.state.replace(/ /g, "-")}` }, lane.state)),
      el("td", {}, lane.busy_share === null ? "n/a"
        : el("span", { class: "bar", title: `busy ${lane.busy_text} of the step` +
            (lane.busy_parts && lane.busy_parts.length ? ` (${lane.busy_parts.join(", ")})` : "") },
          el("span", { style: `width:${Math.round(lane.busy_share * 100)}%` }),
          el("em", {}, lane.busy_text))),
      el("td", {}, lane.ops === null || lane.ops === undefined ? ""
        : `${lane.ops} op${lane.ops === 1 ? "" : "s"}`),
      el("td", {}, lane.kind === "NVML"
        ? [sparkline(lane.util, `${lane.name} utilization % (NVML)`), activity, mean] : ""));
  });
  if (!rows.length && !d.no_gpu) return null;  // nothing recorded per device: no card
  if (rows.length) {
    body.push(el("table", { class: "lanes" },
      el("thead", {}, el("tr", {}, ...["device", "state", "busy share of the step", "ops",
        "utilization over time (NVML)"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)));
  }
  return section("devices", title, ...body);
}

// ---------------------------------------------------------------- (b) bottleneck
function showTip(evt, text) {
  const tip = document.getElementById("gpudiag-tip");
  tip.textContent = text;
  tip.style.display = "block";
  tip.style.left = `${evt.clientX + 12}px`;
  tip.style.top = `${evt.clientY + 12}px`;
}

function hideTip() { document.getElementById("gpudiag-tip").style.display = "none"; }

function breakdownBars(bars, parts) {
  // HTML, not a fixed-width picture: each device's step is a row whose bar takes the room
  // its card has (the longest step the whole bar), every part drawn (hover: its ms), the
  // step's ms beside it, the legend wrapping under it
  const longest = Math.max(...bars.map((b) => b.step_ms), 1e-9);
  const rows = bars.map((b) => el("div", { class: "brow", "data-device": b.device },
    el("span", { class: "bdevice" }, b.device),
    el("span", { class: "bstack" }, parts.filter((p) => (b.parts_ms[p] || 0) > 0).map((part) => {
      const value = b.parts_ms[part];
      const text = `${b.device}: ${part} ${b.parts_text[part]} of ${b.step_text}`;
      return el("span", { class: `part ${part}`, "data-ms": String(value), title: text,
        style: `width:${((value / longest) * 100).toFixed(3)}%;background:${partColor(part)}`,
        onmousemove: (e) => showTip(e, text), onmouseleave: hideTip });
    })),
    el("span", { class: "bms" }, b.step_text)));
  const legend = el("div", { class: "blegend" }, parts.map((p) => el("span", { class: "key" },
    el("i", { style: `background:${partColor(p)}` }), p)));
  return el("div", { class: "breakdown", role: "img", "aria-label": "step breakdown per device" },
    rows, legend);
}

function actionLine(a) {
  // where, then what to change and the step predicted after it, in the terminal's words
  return el("li", { class: "action" }, a.where ? [el("code", {}, a.where), ": "] : null,
    a.said || a.what);
}

function bottleneckCard(b, title) {
  if (!b) {
    return section("bottleneck", title,
      el("p", { class: "muted" }, "no profiled steps in this run (no step breakdown)"));
  }
  const cause = b.cause ? `Bottleneck: ${b.cause}` : "No bottleneck stands out";
  return section("bottleneck", title,
    el("p", { class: `cause ${b.status}` }, cause,
      b.step_text === null ? "" : ` (a ${b.step_text} step)`),
    b.title ? el("p", { class: "title" }, b.title) : null,
    b.where.length ? el("p", { class: "where" }, "Your line: ",
      ...b.where.map((w) => el("code", {}, w))) : null,
    b.actions.length ? el("div", { class: "fix" }, el("strong", {}, "Fix: "),
      el("ul", { class: "actions" }, b.actions.map(actionLine)))
      : b.fix ? el("p", { class: "fix" }, el("strong", {}, "Fix: "), b.fix) : null,
    b.bars.length ? breakdownBars(b.bars, b.parts) : null,
    el("details", {}, el("summary", {}, b.finding), el("p", {}, b.message)));
}

// ---------------------------------------------------------------- (c) learning, (d) scaling
function lineChart({ series, xLabel, yLabel, hline, hlineLabel, ideal, label, vlines,
  vlineLabel }) {
  const w = 520, h = 220, l = 48, b = 30;
  const pts = series.flatMap((s) => s.points);
  if (!pts.length) return el("p", { class: "muted" }, "no points recorded");
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  if (hline !== null && hline !== undefined) ys.push(hline);
  if (ideal) ys.push(...xs);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(0, ...ys);
  const y1 = Math.max(...ys) * 1.05 || 1;
  const X = (x) => l + ((x - x0) / ((x1 - x0) || 1)) * (w - l - 10);
  const Y = (y) => h - b - ((y - y0) / ((y1 - y0) || 1)) * (h - b - 10);
  const g = svg("svg", { width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "chart",
    role: "img", "aria-label": label },
    svg("line", { x1: l, y1: h - b, x2: w - 10, y2: h - b, class: "axis" }),
    svg("line", { x1: l, y1: 10, x2: l, y2: h - b, class: "axis" }),
    svg("text", { x: w / 2, y: h - 4, class: "label" }, xLabel),
    svg("text", { x: 2, y: 12, class: "label" }, yLabel),
    svg("text", { x: l - 4, y: Y(y1) + 4, class: "label end" }, y1.toPrecision(3)),
    svg("text", { x: l - 4, y: h - b, class: "label end" }, y0.toPrecision(2)),
    svg("text", { x: l, y: h - b + 14, class: "label" }, x0),
    svg("text", { x: w - 10, y: h - b + 14, class: "label end" }, x1));
  if (ideal) {
    g.append(svg("line", { x1: X(x0), y1: Y(x0), x2: X(x1), y2: Y(x1), class: "ideal" },
      svg("title", {}, "ideal: speed-up = devices")));
  }
  if (hline !== null && hline !== undefined) {
    g.append(svg("line", { x1: l, y1: Y(hline), x2: w - 10, y2: Y(hline), class: "hline" }),
      svg("text", { x: w - 12, y: Y(hline) - 4, class: "label end" }, hlineLabel));
  }
  for (const x of vlines || []) {  // an epoch's start: where a running mean starts again
    if (x < x0 || x > x1) continue;
    g.append(svg("line", { x1: X(x), y1: 10, x2: X(x), y2: h - b, class: "vline" },
      svg("title", {}, `${vlineLabel} begins at ${xLabel} ${x}`)));
  }
  const colors = ["#c62828", "#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00"];
  series.forEach((s, i) => {
    g.append(svg("polyline", { points: s.points.map(([x, y]) => `${X(x)},${Y(y)}`).join(" "),
      fill: "none", stroke: colors[i % colors.length], "stroke-width": 2 },
    svg("title", {}, s.name)));
    for (const [x, y] of s.points.length <= 12 ? s.points : []) {
      g.append(svg("circle", { cx: X(x), cy: Y(y), r: 3, fill: colors[i % colors.length] },
        svg("title", {}, `${s.name}: ${x} -> ${y.toFixed(3)}`)));
    }
  });
  return el("div", {}, g, el("div", { class: "legend" }, series.map((s, i) =>
    el("span", { style: `color:${colors[i % colors.length]}` }, `— ${s.name} `))));
}

function learningCard(lr, title) {
  if (!lr) return null;
  const ln = lr.ln_classes;
  const said = [...new Set(lr.curves.map((c) => c.loss_is).filter(Boolean))];
  const epochs = [...new Set(lr.curves.flatMap((c) => c.epochs || []))];
  return section("learning", title,
    el("p", { class: `verdict ${lr.status || ""}` }, lr.verdict),
    !lr.curves.length ? null : lineChart({ series: lr.curves, xLabel: "step", yLabel: "loss",
      hline: ln, hlineLabel: ln ? `ln ${lr.num_classes} = ${ln.toFixed(3)} (chance)` : "",
      vlines: epochs, vlineLabel: "epoch",
      label: said.length ? "loss per step (Keras's running mean of each epoch)"
        : "loss per step" }),
    said.map((s) => el("p", { class: "muted loss-is" }, s)));
}

function scalingCard(sc, title) {
  if (!sc) return null;
  const series = Object.entries(sc.strategies).map(([name, pts]) => ({ name,
    points: pts.filter((p) => p.speedup !== null).map((p) => [p.devices, p.speedup]) }));
  return section("scaling", title,
    sc.device_kind === "virtual-cpu" ? el("p", { class: "muted" },
      "virtual CPU devices share the same cores: the speed-up is not a GPU's") : null,
    lineChart({ series, xLabel: "devices", yLabel: "speed-up", ideal: true,
      label: "speed-up against the ideal per device count" }));
}

// ---------------------------------------------------------------- (e) findings
function findingsCard(groups) {
  // every finding under the question its family declares; its title first, the whole
  // message, what to do and the evidence folded under it
  return section("findings", "Every finding, by question",
    groups.map((g) => el("div", { class: "group", "data-question": g.key }, el("h3", {}, g.title),
      g.findings.map((f) => el("details", { class: `finding ${f.status}`, "data-id": f.id },
        el("summary", {}, el("span", { class: `badge ${f.status}` }, f.status.toUpperCase()),
          " ", el("code", {}, f.id), " ", f.headline),
        f.headline !== f.message ? el("p", { class: "message" }, f.message) : null,
        (f.actions || []).length ? el("ul", { class: "actions" },
          f.actions.map((a) => actionLine(a, null))) : null,
        f.advice && f.status !== "ok" ? el("p", { class: "fix" }, "What to do: ", f.advice)
          : null,
        el("pre", { class: "evidence" }, JSON.stringify(f.evidence, null, 1)))))));
}

// ---------------------------------------------------------------- live, diff, page
function liveCard(view) {
  if (view.status !== "running" || !view.live) return null;
  const steps = Object.entries(view.live.steps).map(([n, s]) =>
    el("span", { class: "steps", "data-loop": n }, `${n}: step ${s}`));
  return el("div", { class: "live" }, el("span", { class: "badge running" }, "running"),
    " updated by itself every few seconds; ", steps.length ? steps : "no step yet",
    view.live.stalls.map((f) => el("p", { class: "stall" }, `${f.id}: ${f.message}`)));
}

function diffCard(d) {
  // the diff's answer in words above the two runs; its compared figures folded below
  if (!d) return null;
  if (d.error) return section("diff", "Side by side", el("p", { class: "muted" }, d.error));
  const rows = d.rows.map((r) => el("tr", {}, el("td", {}, r.what), el("td", {}, r.a),
    el("td", {}, r.b), el("td", { class: "change" }, r.change)));
  return section("diff", `Did the fix work? ${d.a} (A) -> ${d.b} (B)`,
    (d.result || []).map((ln) => el("p", { class: "result" }, ln)),
    d.source ? el("p", { class: "muted" }, d.source) : null,
    (d.lines || []).map((ln) => el("p", {}, ln)),
    el("details", { class: "figures" }, el("summary", {}, "every compared figure"),
      el("table", { class: "diff" }, el("thead", {}, el("tr", {},
        ...["", "A", "B", "change"].map((h) => el("th", {}, h)))), el("tbody", {}, rows))));
}

function cards(view) {
  const q = view.questions;
  // a try run has no profiled window of its own (its diagnosis is under runs/): no
  // bottleneck card saying so, its fixes measured instead
  const neck = view.tried && !view.bottleneck ? null
    : bottleneckCard(view.bottleneck, q.why_slow);
  return [triedCard(view.tried, el, section), devicesCard(view.devices, q.devices), neck,
    learningCard(view.learning, q.learning), scalingCard(view.scaling, q.scaling)];
}

function sideColumn(view, name) {
  return el("div", { class: "side", "data-run": view.id },
    el("h2", { class: "side-name" }, `${name}: ${view.id}`),
    el("pre", { class: "headline" }, view.verdict.join("\n")),
    ...cards(view).filter(Boolean), findingsCard(view.groups));
}

async function show(root) {
  clearTimeout(state.timer);
  // the latest choice wins: a slower answer to an earlier choice is dropped, not drawn
  // over the later one (switching runs quickly showed the run chosen first)
  const shown = ++state.shown;
  let view;
  let other = null;
  let diff = null;
  // the choice as it stands now: a selector changed while an answer is awaited must not
  // mix into this request (it sent b=null once the second selector went back to none)
  const [current, otherId] = [state.current, state.other];
  try {
    view = await getJson(`./run?id=${encodeURIComponent(current)}`);
    if (otherId) {
      other = await getJson(`./run?id=${encodeURIComponent(otherId)}`);
      diff = await getJson(`./diff?a=${encodeURIComponent(current)}` +
        `&b=${encodeURIComponent(otherId)}`).catch((e) => ({ error: e.message }));
    }
  } catch (e) {
    if (shown === state.shown) root.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  if (shown !== state.shown) return;
  state.view = view;
  if (other) {  // side by side: the answer in words, then the two runs' cards in two columns,
    // older (A) to newer (B) as the diff orders them, whichever selector named which
    const [older, newer] = diff && diff.a === other.id ? [other, view] : [view, other];
    root.replaceChildren(diffCard(diff), el("div", { class: "sides" },
      sideColumn(older, "A"), sideColumn(newer, "B")));
  } else {
    // a `gpudiag diff` run: its own record's answer first (its cards hold no diagnosis)
    root.replaceChildren(...[
      el("pre", { class: "headline" }, view.verdict.join("\n")), liveCard(view),
      diffCard(view.diff), el("div", { class: "grid" }, ...cards(view)),
      findingsCard(view.groups)].filter(Boolean));
  }
  if (view.status === "running") {
    state.timer = setTimeout(async () => {
      const runs = await getJson("./runs").catch(() => null);
      if (runs) fillRuns(runs.runs);
      show(root);
    }, POLL_MS);
  }
}

function fillRuns(runs) {
  state.runs = runs;
  for (const [id, withNone] of [["gpudiag-run", false], ["gpudiag-other", true]]) {
    const select = document.getElementById(id);
    const chosen = id === "gpudiag-run" ? state.current : state.other;
    select.replaceChildren(...(withNone ? [el("option", { value: "" }, "(none)")] : []),
      ...runs.map((r) => el("option", { value: r.id, selected: r.id === chosen ? "" : null },
        runLabel(r))));
  }
}

export async function render() {
  document.head.append(el("link", { rel: "stylesheet", href: "./style.css" }));
  const root = el("div", { id: "gpudiag-main" }, "reading the runs ...");
  const header = el("header", {}, el("h1", {}, "gpudiag"),
    el("label", {}, "run ", el("select", { id: "gpudiag-run", onchange: (e) => {
      state.current = e.target.value; show(root); } })),
    el("label", {}, "side by side with ", el("select", { id: "gpudiag-other",
      onchange: (e) => { state.other = e.target.value || null; show(root); } })));
  document.body.append(header, root, el("div", { id: "gpudiag-tip", role: "tooltip" }));
  let listing;
  try {
    listing = await getJson("./runs");
  } catch (e) {
    root.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  if (!listing.runs.length) {
    root.replaceChildren(el("p", {}, "no gpudiag run directory in this logdir"));
    return;
  }
  state.current = listing.default ?? listing.runs[0].id;
  fillRuns(listing.runs);
  await show(root);
}
