// warptrace HTML report: lays out the JSON in #wt-data. No network, no dependencies.
// Every string from the trace goes through textContent or an attribute, never innerHTML.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("wt-data").textContent);
  const SVG_NS = "http://www.w3.org/2000/svg";
  const SEVERITIES = ["error", "warning", "info"];

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function svg(tag, attrs, children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }
  function setAttrs(node, attrs) {
    for (const key in attrs || {}) {
      if (attrs[key] === null || attrs[key] === undefined || attrs[key] === false) continue;
      if (key === "text") node.textContent = String(attrs[key]);
      else node.setAttribute(key, attrs[key] === true ? "" : String(attrs[key]));
    }
  }
  function append(node, children) {
    for (const child of [].concat(children || []).flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  function tip(text) { return svg("title", { text: text }); }
  function num(n) { return Number(n).toLocaleString("en-US"); }
  function plural(n, one, many) { return num(n) + " " + (n === 1 ? one : many); }

  // ---------------------------------------------------------------- summary
  function renderSummary() {
    const head = document.getElementById("summary");
    const serious = data.findings.filter((f) => f.severity !== "info").length;
    const verdict = serious
      ? data.summary
      : "no gradient bugs found (checked: " + (data.families_checked.join(", ") || "none") + ")";
    const c = data.counts || {};
    const counts = [
      ["events", c.events], ["tapes", c.tapes], ["launches", c.launches],
      ["recorded launches", c.recorded_launches], ["backward calls", c.backward_calls], ["arrays", c.arrays],
    ].filter((pair) => pair[1] !== undefined);
    append(head, [
      el("h1", { text: "warptrace report" }),
      el("div", { class: "verdict", id: "verdict", text: verdict }),
      el("div", { class: "meta" }, [
        "run ", el("code", { text: data.argv.join(" ") || "?" }),
        data.warp_version ? " · Warp " + data.warp_version : "",
        " · trace ", el("code", { text: data.trace }),
        data.start_time ? " · " + data.start_time : "",
        data.exit_status !== null && data.exit_status !== undefined ? " · exit status " + data.exit_status : "",
        " · warptrace " + data.version,
      ]),
      el("div", { class: "counts" }, counts.map((pair) => el("span", {}, [el("b", { text: num(pair[1]) }), " " + pair[0]]))),
      data.complete ? null : el("div", { class: "note", text:
        "The trace is incomplete (the run stopped before warptrace finished writing it): findings cover only what was recorded." }),
      serious ? null : el("div", { class: "note", text:
        "No rule fired. That does not prove the gradient right: the rules name known hazard patterns; compare with finite differences to measure it." }),
    ]);
  }

  // ---------------------------------------------------------------- filters
  function renderFilters() {
    const nav = document.getElementById("filters");
    const codes = Array.from(new Set(data.findings.map((f) => f.code))).sort();
    const bySeverity = {};
    const byCode = {};
    for (const f of data.findings) {
      bySeverity[f.severity] = (bySeverity[f.severity] || 0) + 1;
      byCode[f.code] = (byCode[f.code] || 0) + 1;
    }
    const box = (cls, value, label) => el("label", {}, [
      el("input", { type: "checkbox", class: cls, value: value, checked: true, id: cls + "-" + value }), " " + label,
    ]);
    append(nav, [
      el("div", { class: "group" }, [el("b", { text: "severity" })].concat(
        SEVERITIES.map((s) => box("filter-severity", s, s + " (" + (bySeverity[s] || 0) + ")")))),
      codes.length ? el("div", { class: "group" }, [el("b", { text: "rule" })].concat(
        codes.map((code) => box("filter-rule", code, code + " (" + byCode[code] + ")")))) : null,
      el("span", { class: "shown", id: "shown" }),
    ]);
    nav.addEventListener("change", applyFilters);
  }
  function applyFilters() {
    const checked = (cls) => new Set(Array.from(document.querySelectorAll("input." + cls + ":checked")).map((i) => i.value));
    const severities = checked("filter-severity");
    const rules = checked("filter-rule");
    let shown = 0;
    for (const card of document.querySelectorAll("article.finding")) {
      const visible = severities.has(card.dataset.severity) && rules.has(card.dataset.code);
      card.hidden = !visible;
      if (visible) shown += 1;
    }
    const total = data.findings.length;
    document.getElementById("shown").textContent = total ? shown + " of " + plural(total, "finding", "findings") + " shown" : "";
  }

  // ---------------------------------------------------------------- findings
  function renderFindings() {
    const section = document.getElementById("findings");
    section.appendChild(el("h2", { text: "Findings" }));
    if (!data.findings.length) section.appendChild(el("p", { class: "empty", text: "No findings." }));
    for (const f of data.findings) section.appendChild(findingCard(f));
  }
  function findingCard(f) {
    const places = [Object.assign({}, f.location, { role: f.location.role || "change" })].concat(f.related);
    return el("article", { class: "finding sev-" + f.severity, id: "finding-" + f.id, "data-code": f.code, "data-severity": f.severity }, [
      el("h3", {}, [
        el("span", { class: "badge " + f.severity, text: f.severity }), f.code + " " + f.name + " ",
        el("span", { class: "count", text: f.count === 1 ? "occurred once" : "occurred " + num(f.count) + " times" }),
      ]),
      el("p", { class: "message", text: f.message }),
      el("ul", { class: "places" }, places.map((loc) => el("li", {}, [
        el("span", { class: "role", text: loc.role || "related" }),
        el("code", { text: loc.file + ":" + loc.line }),
      ]))),
      f.source.map((w) => sourceWindow(w, w.file === f.location.file ? f.location.line : -1)),
      f.hazard ? hazardPicture(f) : null,
      f.fix ? el("p", { class: "fix" }, [el("b", { text: "fix: " }), f.fix]) : null,
      f.doc ? el("p", { class: "doc", text: "Warp documentation: " + f.doc }) : null,
      f.help_url ? el("p", { class: "doc" }, [el("a", { href: f.help_url, target: "_blank", rel: "noopener", text: f.code + " explained" }),
        " (or python -m warptrace explain " + f.code + ")"]) : null,
    ]);
  }
  function sourceWindow(w, primary) {
    // primary: the line to change (the finding's location), drawn red whatever its role
    const lines = w.lines.map((text, i) => {
      const line = w.start + i;
      const roles = w.marks[String(line)] || [];
      const cls = ["src-line"].concat(roles.length ? ["marked"] : [], line === primary ? ["mark-primary"] : [],
        roles.map((r) => "mark-" + r.replace(/[^a-z0-9_-]/gi, "")));
      return el("div", { class: cls.join(" "), "data-line": line, "data-roles": roles.join(" ") }, [
        el("span", { class: "ln", text: line }),
        el("span", { class: "tag", text: roles.join(", ") }),
        el("code", { text: text }),
      ]);
    });
    return el("div", { class: "source" }, [el("div", { class: "src-file", text: w.file }), el("pre", { class: "src" }, lines)]);
  }

  // ---------------------------------------------------------------- hazard picture
  function hazardPicture(f) {
    const h = f.hazard;
    const COL = 30, LANE = 26, LEFT = 170, TOP = 136, RIGHT = 190, BOTTOM = 40;
    const widths = h.columns.map((c) => (c.kind === "fold" ? 2 * COL : COL));
    const xs = [];
    let x = LEFT;
    for (const w of widths) { xs.push(x); x += w; }
    const endX = x;
    const width = endX + RIGHT;
    const height = TOP + h.lanes.length * LANE + BOTTOM;
    const laneY = (i) => TOP + i * LANE + LANE / 2;
    const hot = new Set(h.hazard_lanes);
    const root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, class: "hazard-svg", role: "img",
      "aria-label": "memory hazard of " + f.code });
    h.lanes.forEach((label, i) => {
      root.appendChild(svg("rect", { x: 0, y: TOP + i * LANE + 2, width: endX, height: LANE - 4, class: "lane-bg" + (hot.has(i) ? " hot" : "") }));
      root.appendChild(svg("text", { x: 6, y: laneY(i) + 4, class: "lane-label", text: label.length > 24 ? label.slice(0, 23) + "…" : label }, [tip(label)]));
    });
    let readAt = null, writeAt = null;
    h.columns.forEach((c, ci) => {
      const cx = xs[ci] + widths[ci] / 2;
      if (c.kind === "fold") {
        const what = num(c.count) + (c.count === 1 ? " launch" : " launches") + (c.steps > 1 ? " (×" + num(c.steps) + " steps)" : "") + " folded";
        root.appendChild(svg("rect", { x: xs[ci] + 3, y: TOP - 4, width: widths[ci] - 6, height: h.lanes.length * LANE + 8, class: "fold-box" }, [tip(what)]));
        root.appendChild(svg("text", { x: cx, y: TOP - 30, class: "fold-text", transform: "rotate(-60 " + cx + " " + (TOP - 30) + ")",
          text: "⋯ " + (c.steps > 1 ? "×" + num(c.steps) : num(c.count)) }, [tip(what)]));
        for (const lane of c.lanes) root.appendChild(svg("circle", { cx: cx, cy: laneY(lane), r: 3, class: "mark-fold" }));
        return;
      }
      const name = c.name + (c.line ? ":" + c.line : "");
      root.appendChild(svg("text", { x: cx, y: TOP - 30, class: "col-name" + (c.taped ? "" : " untaped"),
        transform: "rotate(-60 " + cx + " " + (TOP - 30) + ")", text: name.length > 18 ? name.slice(0, 17) + "…" : name },
        [tip(name + (c.taped ? "" : " (not recorded on the tape)") + " · seq " + c.seq)]));
      const hazardLanes = new Set(c.hazard_lanes || []);
      for (const [lane, mark] of c.marks) {
        const y = laneY(lane);
        const isHazard = hazardLanes.has(lane);
        const label = { r: "reads", w: "writes", a: "accumulates into", rw: "reads and writes" }[mark] + " " + h.lanes[lane];
        let shape;
        if (isHazard && (c.hazard === "overwrite" || c.hazard === "read+overwrite") && mark !== "r" && !writeAt) {
          shape = svg("rect", { x: cx - 8, y: y - 8, width: 16, height: 16, class: "hz-overwrite", fill: "#d50000", "data-role": "overwrite" },
            [tip(c.name + " overwrites " + h.lanes[lane] + " after it was read")]);
          writeAt = [cx, y];
          if (c.hazard === "read+overwrite") readAt = [cx, y];
        } else if (isHazard && c.hazard === "read" && (mark === "r" || mark === "rw") && !readAt) {
          shape = svg("circle", { cx: cx, cy: y, r: 7, class: "hz-read", "data-role": "read" }, [tip(c.name + " reads " + h.lanes[lane] + " (its adjoint needs these values)")]);
          readAt = [cx, y];
        } else if (mark === "r") {
          shape = svg("circle", { cx: cx, cy: y, r: 5, class: "mark-r" }, [tip(c.name + " " + label)]);
        } else {
          shape = svg("rect", { x: cx - 5, y: y - 5, width: 10, height: 10, class: "mark-" + mark }, [tip(c.name + " " + label)]);
        }
        root.appendChild(shape);
      }
    });
    if (readAt && writeAt && readAt[0] !== writeAt[0]) {
      const top = readAt[1] - LANE * 0.9;
      root.appendChild(svg("path", { d: "M" + readAt[0] + "," + (readAt[1] - 7) + " C" + readAt[0] + "," + top + " " + writeAt[0] + "," + top + " " + writeAt[0] + "," + (writeAt[1] - 9),
        class: "hz-arc", "marker-end": "" }, [tip("overwrite after read")]));
      root.appendChild(svg("text", { x: writeAt[0] + 12, y: writeAt[1] - 10, class: "hz-label", text: "overwrite after read" }));
    }
    if (h.backward) {
      const bx = endX + 24;
      root.appendChild(svg("line", { x1: bx, y1: TOP - 6, x2: bx, y2: TOP + h.lanes.length * LANE, class: "hz-backward" }, [tip("tape.backward()")]));
      root.appendChild(svg("text", { x: bx + 6, y: TOP + h.lanes.length * LANE, class: "bw-label", text: "backward" + (h.backward.line ? " (line " + h.backward.line + ")" : "") }));
      if (readAt) {
        const y = TOP + h.lanes.length * LANE + 16;
        root.appendChild(svg("path", { d: "M" + bx + "," + (TOP + h.lanes.length * LANE) + " L" + bx + "," + y + " L" + readAt[0] + "," + y + " L" + readAt[0] + "," + (readAt[1] + 8),
          class: "hz-replay" }, [tip("the backward replays the reader's adjoint against the overwritten values")]));
        root.appendChild(svg("text", { x: bx + 6, y: y + 8, class: "bw-label", text: "replays the read" }));
      }
    }
    const caption = "Buffers as lanes, the tape's launches in order (" + plural(h.launches, "launch", "launches") +
      (h.period ? ", repeated step of " + h.period : "") + "): ○ read, ■ write (light green: accumulate, purple: read and write); " +
      "red: the overwrite of memory read earlier, before the backward (purple) replays the read; " +
      "orange names: launches not recorded on this tape.";
    return el("div", { class: "hazard" }, [root, el("div", { class: "caption", text: caption })]);
  }

  // ---------------------------------------------------------------- gradient health
  // Per backward call site: log10 of the loss and of the gradient and parameter norms per step;
  // a divergence (WT505) is marked where its growth began and at the first non-finite value.
  function renderHealth() {
    const section = document.getElementById("health");
    if (!data.health || !data.health.length) { section.hidden = true; return; }
    section.appendChild(el("h2", { text: "Gradient health" }));
    for (const h of data.health) section.appendChild(healthChart(h));
    section.appendChild(el("div", { class: "legend", text:
      "log10 scale; purple: loss, blue: gradient norm, dashed green: parameter norm (over the leaves); " +
      "orange dashed line: where a divergence's growth began; red line: the first non-finite value." }));
  }
  function healthChart(h) {
    const W = 760, H = 190, LEFT = 56, RIGHT = 16, TOP = 22, BOTTOM = 26;
    const values = [].concat(h.loss, h.grad, h.param).filter((v) => v !== null && v > 0);
    const logs = values.map((v) => Math.log10(v));
    let lo = logs.length ? Math.floor(Math.min.apply(null, logs)) : 0;
    let hi = logs.length ? Math.ceil(Math.max.apply(null, logs)) : 1;
    if (hi <= lo) hi = lo + 1;
    const last = Math.max(1, h.steps - 1);
    const px = (step) => LEFT + (W - LEFT - RIGHT) * step / last;
    const py = (v) => TOP + (H - TOP - BOTTOM) * (1 - (Math.log10(v) - lo) / (hi - lo));
    const root = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "health-svg", role: "img",
      "aria-label": "gradient health at " + h.backward });
    root.appendChild(svg("line", { x1: LEFT, y1: H - BOTTOM, x2: W - RIGHT, y2: H - BOTTOM, class: "hl-axis" }));
    root.appendChild(svg("line", { x1: LEFT, y1: TOP, x2: LEFT, y2: H - BOTTOM, class: "hl-axis" }));
    const every = Math.max(1, Math.ceil((hi - lo) / 6));
    for (let e = lo; e <= hi; e += every) {
      root.appendChild(svg("text", { x: LEFT - 6, y: py(Math.pow(10, e)) + 4, "text-anchor": "end", class: "hl-tick", text: "1e" + e }));
    }
    root.appendChild(svg("text", { x: W - RIGHT, y: H - 6, "text-anchor": "end", class: "hl-tick", text: "step " + last }));
    root.appendChild(svg("text", { x: LEFT, y: H - 6, class: "hl-tick", text: "step 0" }));
    root.appendChild(svg("text", { x: LEFT, y: 14, class: "hl-label", text: "backward at " + h.backward + " (" + plural(h.steps, "step", "steps") + ")" }));
    const line = (series, cls, name) => {
      let d = "";
      let pen = false;
      series.forEach((v, i) => {
        if (v === null || v <= 0) { pen = false; return; }
        d += (pen ? " L" : " M") + px(h.x[i]).toFixed(1) + "," + py(v).toFixed(1);
        pen = true;
      });
      if (d) root.appendChild(svg("path", { d: d, class: cls }, [tip(name)]));
    };
    line(h.param, "hl-param", "parameter norm");
    line(h.grad, "hl-grad", "gradient norm");
    line(h.loss, "hl-loss", "loss");
    const dv = h.divergence;
    if (dv) {
      const gx = px(dv.start_step), bx = px(dv.nonfinite_step);
      root.appendChild(svg("line", { x1: gx, y1: TOP, x2: gx, y2: H - BOTTOM, class: "hl-growth", "data-role": "growth" },
        [tip("the " + dv.quantity + " grows from step " + dv.start_step + " (divergence, WT505)")]));
      root.appendChild(svg("text", { x: gx + 4, y: TOP + 10, class: "hl-growth-text", text: "growth begins (step " + dv.start_step + ")" }));
      root.appendChild(svg("line", { x1: bx, y1: TOP, x2: bx, y2: H - BOTTOM, class: "hl-bad", "data-role": "nonfinite" },
        [tip("first non-finite value at step " + dv.nonfinite_step)]));
      root.appendChild(svg("text", { x: bx - 4, y: TOP + 24, "text-anchor": "end", class: "hl-bad-text", text: "first NaN/inf (step " + dv.nonfinite_step + ")" }));
    }
    const caption = dv
      ? "Diverged: the " + dv.quantity + " grew from " + dv.from.toPrecision(3) + " at step " + dv.start_step + " to " +
        dv.to.toPrecision(3) + " at step " + dv.last_finite_step + "; first non-finite value at step " + dv.nonfinite_step +
        (dv.curvature ? "; step size " + dv.curvature.step_size.toPrecision(3) + " above 2/L = " + dv.curvature.limit.toPrecision(3) +
          " from step " + dv.curvature.from_step : "") + " (see WT505)."
      : "";
    return el("div", { class: "hazard health" }, [root, caption ? el("div", { class: "caption", text: caption }) : null]);
  }

  // ---------------------------------------------------------------- timeline
  function renderTimeline() {
    const section = document.getElementById("timeline");
    const t = data.timeline;
    section.appendChild(el("h2", { text: "Timeline" }));
    if (!t) { section.appendChild(el("p", { class: "empty", text: "The trace was not available when the report was written." })); return; }
    const LEFT = 130, ROW = 18, TOP = 26;
    const cell = Math.max(2, Math.min(24, Math.floor(900 / t.bins)));
    const width = LEFT + t.bins * cell + 10;
    const height = TOP + t.rows.length * ROW + 6;
    const root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, class: "timeline-svg" });
    let peak = 1;
    for (const row of t.cells) for (const c of row) peak = Math.max(peak, c[1], c[2]);
    const shade = (n) => (0.3 + 0.7 * Math.log(n + 1) / Math.log(peak + 1)).toFixed(2);
    const perBin = t.events / t.bins;
    const range = (b) => perBin <= 1 ? "event " + b : "events " + num(Math.floor(b * perBin)) + "–" + num(Math.floor((b + 1) * perBin) - 1);
    t.rows.forEach((name, r) => {
      const y = TOP + r * ROW;
      root.appendChild(svg("text", { x: 4, y: y + 13, class: "tl-row-label", text: name }));
      for (const c of t.cells[r]) {
        const [b, fwd, bwd, label] = c;
        const x = LEFT + b * cell;
        const what = (label ? label + " · " : "") + range(b) + ": " + (fwd ? plural(fwd, "forward effect", "forward effects") : "") +
          (fwd && bwd ? ", " : "") + (bwd ? plural(bwd, "backward effect", "backward effects") : "");
        if (fwd) root.appendChild(svg("rect", { x: x, y: y + 2, width: cell - (cell > 3 ? 1 : 0), height: bwd ? 7 : 14, class: "tl-fwd", "fill-opacity": shade(fwd) }, [tip(what)]));
        if (bwd) root.appendChild(svg("rect", { x: x, y: y + (fwd ? 9 : 2), width: cell - (cell > 3 ? 1 : 0), height: fwd ? 7 : 14, class: "tl-bwd", "fill-opacity": shade(bwd) }, [tip(what)]));
      }
    });
    const markY = { backward: 4, zero: 11, reset: 11 };
    for (const [kind, b, count] of t.marks) {
      const x = LEFT + b * cell + cell / 2;
      root.appendChild(svg("path", { d: "M" + (x - 4) + "," + markY[kind] + " l8,0 l-4,7 z", class: "tl-" + kind }, [tip(plural(count, kind, kind + "s") + " · " + range(b))]));
    }
    for (const [index, b, severity] of t.findings) {
      const x = LEFT + b * cell + cell / 2;
      root.appendChild(svg("rect", { x: x - 1, y: TOP - 2, width: 2, height: t.rows.length * ROW + 2, class: "tl-finding", "fill-opacity": severity === "info" ? 0.3 : 0.8 },
        [tip(data.findings[index].code + " first occurs here")]));
    }
    section.appendChild(el("div", { class: "hazard" }, [root]));
    section.appendChild(el("div", { class: "legend", text:
      num(t.events) + " events in " + t.bins + " bins (event order); blue: forward launches, copies and memsets; orange: backward; " +
      "▼ purple: tape.backward(), green: tape.zero(), grey: tape.reset(); red line: a finding's first occurrence; " +
      plural(t.untaped_launches, "untaped launch", "untaped launches") + " on the untaped row." }));
  }

  // ---------------------------------------------------------------- arrays
  function renderArrays() {
    const section = document.getElementById("arrays");
    const a = data.arrays;
    section.appendChild(el("h2", { text: "Arrays" }));
    if (!a) return;
    const head = ["label", "kind", "shape", "dtype", "requires_grad", "allocated at"];
    const rows = a.rows.map((r) => el("tr", {}, [
      el("td", {}, [el("code", { text: r[0] })]), el("td", { text: r[1] }), el("td", { text: r[2] }), el("td", { text: r[3] }),
      el("td", { text: r[4] ? "yes" : "no" }), el("td", {}, r[5] ? [el("code", { text: r[5] }), r[6] ? "  " + r[6] : ""] : []),
    ]));
    section.appendChild(el("table", { class: "arrays" }, [el("thead", {}, [el("tr", {}, head.map((h) => el("th", { text: h })))]), el("tbody", {}, rows)]));
    if (a.total > a.rows.length) section.appendChild(el("p", { class: "empty", text: num(a.total - a.rows.length) + " more arrays not listed" }));
  }

  renderSummary();
  renderFilters();
  renderFindings();
  renderHealth();
  renderTimeline();
  renderArrays();
  applyFilters();
  document.body.dataset.ready = "true";
})();
