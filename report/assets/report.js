// dolma-pipe report: lays out the sections of the data embedded in this page. Charts are Vega-Lite
// specs drawn by Vega (inlined above this script: nothing is fetched, the page works offline);
// tables, sampled documents and clusters are HTML. The switch (documents, characters, tokens)
// sets the "weight" parameter of every weighted chart.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var weight = "docs";
  var views = []; // [view, spec] of every weighted chart drawn
  var pending = [];

  function el(tag, attrs, parent, text) {
    var n = document.createElement(tag);
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

  function vega(node, spec) {
    var done = window.vegaEmbed(node, spec.vega, { renderer: "svg", actions: false }).then(function (result) {
      node.setAttribute("data-drawn", "1");
      if (spec.weighted) {
        views.push(result.view);
        if (weight !== "docs") return result.view.signal("weight", weight).runAsync();
      }
    }, function (err) {
      node.setAttribute("data-drawn", "0");
      el("p", { class: "caption error" }, node, "This chart could not be drawn: " + err);
      console.error(err);
    });
    pending.push(done);
  }

  function draw(node, spec) {
    node.innerHTML = "";
    if (spec.vega) vega(node, spec);
    else if (spec.type === "table") table(node, spec);
    else if (spec.type === "samples") samples(node, spec);
    else if (spec.type === "clusters") clusters(node, spec);
  }

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
        draw(el("div", { class: "body" }, fig), spec);
      });
    });
    document.querySelectorAll("input[name=weight]").forEach(function (r) {
      if (r.value === "tokens" && !DATA.has_tokens) { r.disabled = true; r.parentNode.title = "no tokenizer: token weights unknown"; }
      r.addEventListener("change", function () {
        weight = r.value;
        document.body.setAttribute("data-weight", "pending");
        Promise.all(views.map(function (v) { return v.signal("weight", weight).runAsync(); })).then(function () {
          document.body.setAttribute("data-weight", weight);
        });
      });
    });
    // Set once every chart is drawn (the browser test waits for it).
    Promise.all(pending).then(function () { document.body.setAttribute("data-drawn", "all"); document.body.setAttribute("data-weight", weight); });
  }
  build();
})();
