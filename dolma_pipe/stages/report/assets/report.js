// dolma-pipe report: draws the charts of the data embedded in this page as SVG. No library, nothing
// fetched: the page works offline. Weighted charts redraw when the switch (documents, characters,
// tokens) changes.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  var SVG = "http://www.w3.org/2000/svg";
  var weight = "docs";
  var WEIGHT_NAMES = { docs: "documents", chars: "characters", tokens: "tokens" };

  function el(tag, attrs, parent, text) {
    var n = tag in { svg: 1, rect: 1, line: 1, text: 1, path: 1, g: 1, title: 1, circle: 1 } ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (var k in attrs || {}) n.setAttribute(k, attrs[k]);
    if (text !== undefined) n.textContent = text;
    if (parent) parent.appendChild(n);
    return n;
  }
  function fmt(v) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return a >= 100 ? v.toFixed(1) : v.toPrecision(3);
  }
  function values(series, spec) {
    var v = series.values;
    return spec.weighted ? v[weight] || v.docs : v;
  }
  function legend(parent, series) {
    var box = el("div", { class: "legend" }, parent);
    series.forEach(function (s, i) {
      var item = el("span", {}, box);
      el("i", { style: "background:" + COLORS[i % COLORS.length] }, item);
      item.appendChild(document.createTextNode(s.name));
    });
  }
  function axis(svg, x0, y0, w, h, max, label) {
    el("line", { x1: x0, y1: y0, x2: x0, y2: y0 - h, class: "axis" }, svg);
    el("line", { x1: x0, y1: y0, x2: x0 + w, y2: y0, class: "axis" }, svg);
    for (var i = 0; i <= 4; i++) {
      var y = y0 - (h * i) / 4;
      el("line", { x1: x0, y1: y, x2: x0 + w, y2: y, class: "grid" }, svg);
      el("text", { x: x0 - 4, y: y + 4, "text-anchor": "end", class: "tick" }, svg, fmt((max * i) / 4));
    }
    if (label) el("text", { x: 4, y: 12, class: "tick" }, svg, label);
  }

  // Bars (categories x series, stacked or side by side) and histograms (bins x series).
  function bars(node, spec, categories) {
    var series = spec.series || [];
    var n = categories.length;
    var W = Math.max(560, Math.min(1100, 60 + n * 28)), H = 260, x0 = 64, y0 = H - 70, w = W - x0 - 10, h = y0 - 20;
    var stacked = spec.stacked !== false || spec.type === "hist";
    var max = 0;
    for (var c = 0; c < n; c++) {
      var sum = 0;
      series.forEach(function (s) {
        var v = +values(s, spec)[c] || 0;
        sum = stacked ? sum + v : Math.max(sum, v);
      });
      max = Math.max(max, sum);
    }
    if (max <= 0) max = 1;
    var svg = el("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "chart" }, node);
    axis(svg, x0, y0, w, h, max, spec.weighted ? WEIGHT_NAMES[weight] : spec.ylabel || "");
    var slot = w / Math.max(1, n), drawn = 0;
    for (c = 0; c < n; c++) {
      var base = 0;
      series.forEach(function (s, i) {
        var v = +values(s, spec)[c] || 0;
        if (v <= 0) return;
        var bh = (h * v) / max, bw = stacked ? slot * 0.8 : (slot * 0.8) / series.length;
        var x = x0 + c * slot + slot * 0.1 + (stacked ? 0 : i * bw);
        var r = el("rect", { x: x, y: y0 - base - bh, width: Math.max(1, bw), height: Math.max(0.5, bh), fill: COLORS[i % COLORS.length] }, svg);
        el("title", {}, r, s.name + " · " + categories[c] + ": " + fmt(v));
        if (stacked) base += bh;
        drawn++;
      });
      var every = Math.ceil(n / 30);
      if (c % every === 0) {
        var lx = x0 + c * slot + slot / 2;
        var label = String(categories[c]);
        el("text", { x: lx, y: y0 + 10, transform: "rotate(40 " + lx + " " + (y0 + 10) + ")", class: "tick" }, svg, label.length > 22 ? label.slice(0, 21) + "…" : label);
      }
    }
    svg.setAttribute("data-drawn", drawn);
    if (series.length > 1 || spec.weighted) legend(node, series);
  }

  function lines(node, spec) {
    var W = 560, H = 240, x0 = 64, y0 = H - 30, w = W - x0 - 10, h = y0 - 20;
    var xmin = Infinity, xmax = -Infinity, ymin = Infinity, ymax = -Infinity;
    spec.series.forEach(function (s) {
      s.x.forEach(function (x, i) {
        var y = s.y[i];
        if (y === null || !isFinite(y)) return;
        xmin = Math.min(xmin, x); xmax = Math.max(xmax, x); ymin = Math.min(ymin, y); ymax = Math.max(ymax, y);
      });
    });
    if (!(xmax > xmin)) { xmax = xmin + 1; }
    if (!(ymax > ymin)) { ymax = ymin + 1; }
    var svg = el("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, class: "chart" }, node);
    el("line", { x1: x0, y1: y0, x2: x0 + w, y2: y0, class: "axis" }, svg);
    el("line", { x1: x0, y1: y0, x2: x0, y2: y0 - h, class: "axis" }, svg);
    for (var i = 0; i <= 4; i++) {
      var yy = y0 - (h * i) / 4;
      el("line", { x1: x0, y1: yy, x2: x0 + w, y2: yy, class: "grid" }, svg);
      el("text", { x: x0 - 4, y: yy + 4, "text-anchor": "end", class: "tick" }, svg, fmt(ymin + ((ymax - ymin) * i) / 4));
      el("text", { x: x0 + (w * i) / 4, y: y0 + 14, "text-anchor": "middle", class: "tick" }, svg, fmt(xmin + ((xmax - xmin) * i) / 4));
    }
    var drawn = 0;
    spec.series.forEach(function (s, k) {
      var d = "";
      s.x.forEach(function (x, j) {
        var y = s.y[j];
        if (y === null || !isFinite(y)) return;
        d += (d ? "L" : "M") + (x0 + ((x - xmin) / (xmax - xmin)) * w).toFixed(1) + "," + (y0 - ((y - ymin) / (ymax - ymin)) * h).toFixed(1);
        drawn++;
      });
      var p = el("path", { d: d, fill: "none", stroke: COLORS[k % COLORS.length], "stroke-width": 1.6 }, svg);
      el("title", {}, p, s.name);
      if (s.x.length === 1) el("circle", { cx: x0 + w / 2, cy: y0 - h / 2, r: 3, fill: COLORS[k % COLORS.length] }, svg);
    });
    svg.setAttribute("data-drawn", drawn);
    legend(node, spec.series);
  }

  function table(node, spec) {
    var t = el("table", {}, node);
    var tr = el("tr", {}, el("thead", {}, t));
    spec.columns.forEach(function (c) { el("th", {}, tr, c); });
    var body = el("tbody", {}, t);
    spec.rows.forEach(function (r) {
      var row = el("tr", {}, body);
      r.forEach(function (v) { el("td", { class: typeof v === "number" ? "num" : "" }, row, fmt(v)); });
    });
  }

  function marked(parent, text, spans) {
    var pos = 0;
    (spans || []).forEach(function (s) {
      if (s[0] > pos) parent.appendChild(document.createTextNode(text.slice(pos, s[0])));
      el("mark", {}, parent, text.slice(Math.max(pos, s[0]), s[1]));
      pos = Math.max(pos, s[1]);
    });
    parent.appendChild(document.createTextNode(text.slice(pos)));
  }

  function samples(node, spec) {
    spec.docs.forEach(function (d) {
      var card = el("div", { class: "doc" }, node);
      var head = d.id + " · " + d.source + " · " + d.file + ":" + d.line;
      if (d.chars !== undefined) head += " · " + fmt(d.chars) + " characters";
      if (d.score !== undefined && d.score !== null) head += " · score " + fmt(d.score);
      el("div", { class: "head" }, card, head);
      if (d.values) {
        var vals = el("div", { class: "values" }, card);
        for (var k in d.values) el("code", {}, vals, k + " = " + JSON.stringify(d.values[k]));
      }
      var body = el("pre", {}, card);
      if (d.text !== undefined) {
        if (d.offset) body.appendChild(document.createTextNode("… "));
        marked(body, d.text, d.spans);
        if (d.offset + d.text.length < d.chars) body.appendChild(document.createTextNode(" …"));
      } else {
        el("mark", {}, body, d.paragraph);
      }
      if (d.match) {
        el("div", { class: "head" }, card, "matches evaluation document " + d.match.id + " (" + d.match.file + ")");
        var m = el("pre", {}, card);
        marked(m, d.match.text, d.match.spans);
      }
    });
  }

  function clusters(node, spec) {
    spec.clusters.forEach(function (c) {
      el("div", { class: "head" }, node, "cluster " + c.cluster + " · " + c.size + " members");
      var row = el("div", { class: "side" }, node);
      c.members.forEach(function (m) {
        var col = el("div", { class: "doc" }, row);
        el("div", { class: "head" }, col, (m.survivor ? "survivor · " : "") + m.id + " · " + m.file + ":" + m.line);
        var pre = el("pre", {}, col);
        m.diff.forEach(function (seg) {
          if (seg[0] === "=") pre.appendChild(document.createTextNode(seg[1] + " "));
          else el("ins", {}, pre, seg[1] + " ");
        });
      });
    });
  }

  function draw(node, spec) {
    node.innerHTML = "";
    if (spec.type === "bars") bars(node, spec, spec.categories);
    else if (spec.type === "hist") bars(node, spec, spec.bins);
    else if (spec.type === "lines") lines(node, spec);
    else if (spec.type === "table") table(node, spec);
    else if (spec.type === "samples") samples(node, spec);
    else if (spec.type === "clusters") clusters(node, spec);
  }

  var weighted = [];
  function build() {
    var nav = document.getElementById("nav");
    var main = document.getElementById("sections");
    DATA.sections.forEach(function (sec) {
      var a = el("a", { href: "#" + sec.id }, nav, sec.title + " (" + sec.charts.length + ")");
      a.className = sec.charts.length ? "" : "empty";
      var s = el("section", { id: sec.id, "data-charts": sec.charts.length }, main);
      el("h2", {}, s, sec.title);
      if (!sec.charts.length) el("p", { class: "caption" }, s, "Nothing to show: none of the runs read has this stage.");
      sec.charts.forEach(function (spec, i) {
        var fig = el("figure", { class: "figure", "data-type": spec.type, id: sec.id + "-" + i }, s);
        el("h3", {}, fig, spec.title);
        el("figcaption", {}, fig, spec.caption);
        var body = el("div", { class: "body" }, fig);
        draw(body, spec);
        if (spec.weighted) weighted.push([body, spec]);
      });
    });
    document.querySelectorAll("input[name=weight]").forEach(function (r) {
      if (r.value === "tokens" && !DATA.has_tokens) { r.disabled = true; r.parentNode.title = "no tokenizer: token weights unknown"; }
      r.addEventListener("change", function () {
        weight = r.value;
        weighted.forEach(function (w) { draw(w[0], w[1]); });
      });
    });
  }
  build();
})();
