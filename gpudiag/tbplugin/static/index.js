// The GPUDIAG dashboard: an ES module TensorBoard loads in its plugin iframe (render()).
// Plain DOM and SVG, no library, nothing fetched but this plugin's own routes
// (./runs, ./run, ./diff, ./style.css: relative to the iframe's base, /data/plugin/gpudiag/).
// The first screen answers, per run: which devices worked, why a step is as slow as it is
// (and the line to change), is it learning, did more devices help; then every finding.

const POLL_MS = 5000; // a running run is read again this often (TensorBoard: ~30 s)
const PART_COLORS = {
  compute: "#2e7d32", input: "#f9a825", communication: "#1565c0",
  host: "#8e24aa", idle: "#bdbdbd",
};
const SVG = "http://www.w3.org/2000/svg";
const state = { runs: [], current: null, other: null, timer: null, view: null };

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

const pct = (x) => (x === null || x === undefined ? "n/a" : `${Math.round(x * 100)}%`);
const ms = (x) => (x === null || x === undefined ? "n/a" : `${x.toFixed(2)} ms`);

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

function devicesCard(d) {
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
        : el("span", { class: "bar", title: `busy ${pct(lane.busy_share)} of the step` },
          el("span", { style: `width:${Math.round(lane.busy_share * 100)}%` }),
          el("em", {}, pct(lane.busy_share)))),
      el("td", {}, lane.ops === null || lane.ops === undefined ? "" : `${lane.ops} ops`),
      el("td", {}, lane.kind === "NVML"
        ? [sparkline(lane.util, `${lane.name} utilization % (NVML)`), activity, mean] : ""));
  });
  if (rows.length) {
    body.push(el("table", { class: "lanes" },
      el("thead", {}, el("tr", {}, ...["device", "state", "busy share of the step", "ops",
        "utilization over time (NVML)"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)));
  } else if (!d.no_gpu) {
    body.push(el("p", { class: "muted" }, "this run recorded no per-device evidence"));
  }
  return section("devices", "Which devices worked?", ...body);
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

function breakdownBars(bars) {
  const w = 560, rowH = 26, left = 150;
  const longest = Math.max(...bars.map((b) => b.step_ms), 1e-9);
  const g = svg("svg", { width: w + left + 70, height: bars.length * rowH + 24,
    class: "breakdown", role: "img", "aria-label": "step breakdown per device" });
  bars.forEach((b, i) => {
    const y = i * rowH;
    g.append(svg("text", { x: 0, y: y + 17, class: "label" }, b.device));
    let x = left;
    for (const [part, value] of Object.entries(b.parts_ms)) {
      const width = (value / longest) * w;
      if (width <= 0) continue;
      const text = `${b.device}: ${part} ${value.toFixed(2)} ms of ${b.step_ms.toFixed(2)} ms`;
      const rect = svg("rect", { x, y: y + 4, width, height: rowH - 8, fill: PART_COLORS[part],
        class: `part ${part}`, "data-ms": String(value) }, svg("title", {}, text));
      rect.addEventListener("mousemove", (e) => showTip(e, text));
      rect.addEventListener("mouseleave", hideTip);
      g.append(rect);
      x += width;
    }
    g.append(svg("text", { x: x + 6, y: y + 17, class: "label" }, ms(b.step_ms)));
  });
  const legend = Object.entries(PART_COLORS).map(([p, c], i) => [
    svg("rect", { x: left + i * 110, y: bars.length * rowH + 8, width: 10, height: 10, fill: c }),
    svg("text", { x: left + i * 110 + 14, y: bars.length * rowH + 17, class: "label" }, p)]);
  g.append(...legend.flat());
  return g;
}

function bottleneckCard(b) {
  if (!b) {
    return section("bottleneck", "Why is a step as slow as it is?",
      el("p", { class: "muted" }, "no profiled steps in this run (no step breakdown)"));
  }
  const cause = b.cause ? `Bottleneck: ${b.cause}` : "No bottleneck stands out";
  return section("bottleneck", "Why is a step as slow as it is?",
    el("p", { class: `cause ${b.status}` }, cause,
      b.step_ms === null ? "" : ` (a ${ms(b.step_ms)} step)`),
    b.where.length ? el("p", { class: "where" }, "Your line: ",
      ...b.where.map((w) => el("code", {}, w))) : null,
    b.fix ? el("p", { class: "fix" }, el("strong", {}, "Fix: "), b.fix) : null,
    b.bars.length ? breakdownBars(b.bars) : null,
    el("details", {}, el("summary", {}, b.finding), el("p", {}, b.message)));
}

// ---------------------------------------------------------------- (c) learning, (d) scaling
function lineChart({ series, xLabel, yLabel, hline, hlineLabel, ideal, label }) {
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
  const g = svg("svg", { width: w, height: h, class: "chart", role: "img", "aria-label": label },
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

function learningCard(lr) {
  if (!lr) return null;
  const ln = lr.ln_classes;
  return section("learning", "Is it learning?",
    el("p", { class: `verdict ${lr.status || ""}` }, lr.verdict),
    lineChart({ series: lr.curves, xLabel: "step", yLabel: "loss", hline: ln,
      hlineLabel: ln ? `ln ${lr.num_classes} = ${ln.toFixed(3)} (chance)` : "",
      label: "loss per step" }));
}

function scalingCard(sc) {
  if (!sc) return null;
  const series = Object.entries(sc.strategies).map(([name, pts]) => ({ name,
    points: pts.filter((p) => p.speedup !== null).map((p) => [p.devices, p.speedup]) }));
  return section("scaling", "Did more devices help?",
    sc.device_kind === "virtual-cpu" ? el("p", { class: "muted" },
      "virtual CPU devices share the same cores: the speed-up is not a GPU's") : null,
    lineChart({ series, xLabel: "devices", yLabel: "speed-up", ideal: true,
      label: "speed-up against the ideal per device count" }));
}

// ---------------------------------------------------------------- (e) findings
function findingsCard(groups) {
  return section("findings", "Every finding, by question",
    groups.map((g) => el("div", { class: "group" }, el("h3", {}, g.title),
      g.findings.map((f) => el("details", { class: `finding ${f.status}` },
        el("summary", {}, el("span", { class: `badge ${f.status}` }, f.status.toUpperCase()),
          " ", el("code", {}, f.id), " ", f.message),
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
  if (!d) return null;
  if (d.error) return section("diff", "Side by side", el("p", { class: "muted" }, d.error));
  const rows = d.rows.map((r) => el("tr", {}, el("td", {}, r.what), el("td", {}, r.a),
    el("td", {}, r.b), el("td", { class: "change" }, r.change)));
  return section("diff", `What changed: ${d.a} -> ${d.b}`,
    d.source ? el("p", { class: "muted" }, d.source) : null,
    el("table", { class: "diff" }, el("thead", {}, el("tr", {},
      ...["", d.a, d.b, "change"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
    (d.lines || []).map((ln) => el("p", {}, ln)));
}

async function show(root) {
  clearTimeout(state.timer);
  let view;
  let diff = null;
  try {
    view = await getJson(`./run?id=${encodeURIComponent(state.current)}`);
    if (state.other) {
      diff = await getJson(`./diff?a=${encodeURIComponent(state.current)}` +
        `&b=${encodeURIComponent(state.other)}`).catch((e) => ({ error: e.message }));
    }
  } catch (e) {
    root.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  state.view = view;
  const main = el("div", { class: "grid" }, devicesCard(view.devices),
    bottleneckCard(view.bottleneck), learningCard(view.learning), scalingCard(view.scaling));
  root.replaceChildren(...[
    el("pre", { class: "headline" }, view.verdict.join("\n")), liveCard(view),
    diffCard(diff), main, findingsCard(view.groups)].filter(Boolean));
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
