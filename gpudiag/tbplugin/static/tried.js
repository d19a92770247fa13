// The card "fixes tried" of a `gpudiag try` run (the /run view's `tried`, written by
// gpudiag.verdicts.tried): the answer's first line as its heading, then each fix: its
// label and verdict word, the line as written and as it would be, B/A measured with its
// interval and rounds, the prediction beside it marked inside or outside its interval;
// then the advised fixes not tried. Every number arrives as words from the server (the
// terminal's, by gpudiag.layout.units' rules): nothing is formatted here.
// index.js passes its own DOM helpers (el, section), so the two modules share them.

function fixRow(f, el) {
  const verdict = el("span", { class: `badge verdict-${f.verdict.replace(/ /g, "-")}` },
    f.verdict);
  const measured = f.measured === null ? el("span", { class: "muted" },
    f.broke ? `not measured: ${f.broke}` : "no step measured")
    : el("span", { class: "measured" }, f.measured);
  const prediction = f.predicted === null
    ? el("span", { class: "muted" }, "no prediction for this fix alone")
    : [el("span", { class: "predicted" }, f.predicted),
      f.held ? el("span", { class: `held ${f.inside ? "inside" : "outside"}` },
        `: measured ${f.inside ? "inside" : "outside"} it`) : null];
  return el("div", { class: `tried-fix ${f.status}`, "data-fix": f.fix },
    el("p", { class: "fix-head" }, verdict, " ", el("strong", {}, f.label)),
    el("table", { class: "change" }, el("tbody", {},
      f.as_written ? el("tr", {}, el("th", {}, "as written"),
        el("td", {}, el("code", {}, f.as_written))) : null,
      f.as_it_would_be ? el("tr", {}, el("th", {}, "as it would be"),
        el("td", {}, el("code", { class: "fixed" }, f.as_it_would_be)))
        : el("tr", {}, el("th", {}, "the change"), el("td", {}, f.change || "")))),
    el("p", { class: "measure" }, "measured ", measured, f.step ? `: ${f.step}` : ""),
    el("p", { class: "prediction" }, prediction));
}

export function triedCard(t, el, section) {
  if (!t) return null;
  const notTried = t.not_tried.map((n) => el("li", {},
    n.where ? [el("code", {}, n.where), ": "] : null, n.what,
    n.predicted ? ` (${n.predicted})` : "", n.why ? el("span", { class: "muted" },
      ` - ${n.why}`) : null));
  return section("tried", "Fixes tried",
    el("p", { class: "tried-headline" }, t.headline),
    t.fixes.map((f) => fixRow(f, el)),
    notTried.length ? el("div", { class: "not-tried" },
      el("strong", {}, "Not tried: change it by hand"), el("ul", {}, notTried)) : null,
    t.how ? el("details", {}, el("summary", {}, "how the trials ran"), el("p", {}, t.how))
      : null);
}
