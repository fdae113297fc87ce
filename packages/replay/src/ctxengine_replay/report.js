// The interactive replay report (see html_report.py): reads the JSON in #replay-data and draws
// the tables and SVG charts. No libraries, no network: the page must open from a file.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  var hidden = {}; // scenario name -> true while unticked in the legend
  var current = 0; // index of the session shown

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    return node;
  }

  function colour(index) { return data.palette[index % data.palette.length]; }

  function int(n) { return Math.round(n).toLocaleString("en-US"); }

  function money(v) { return "$" + (v >= 0.1 ? v.toFixed(2) : v.toFixed(4)); }

  function pct(v) { return v === null ? "-" : (100 * v).toFixed(1) + "%"; }

  function fillTable(table, header, rows) {
    table.textContent = "";
    var head = el("tr");
    header.forEach(function (h) { head.appendChild(el("th", {}, h)); });
    table.appendChild(head);
    rows.forEach(function (row) {
      var tr = el("tr");
      row.forEach(function (cell, i) {
        var td = el("td");
        if (i === 0 && cell.colour) {
          td.appendChild(el("span", { "class": "swatch", style: "background:" + cell.colour }));
          td.appendChild(document.createTextNode(cell.text));
        } else {
          td.textContent = cell;
        }
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  // Round tick steps (1, 2, 5 x 10^k); integer steps only when asked (turn numbers).
  function ticks(max, wanted, integer) {
    if (!(max > 0)) return [0];
    var raw = max / wanted;
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * power; })
      .filter(function (s) { return s >= raw; })[0];
    if (integer) step = Math.max(1, Math.round(step));
    var top = Math.ceil(max / step - 1e-9) * step; // the last tick is at or above max
    var out = [];
    for (var i = 0; i * step <= top + step * 1e-9; i++) out.push(i * step);
    return out;
  }

  function tickLabel(v, isMoney) {
    if (v === 0) return isMoney ? "$0" : "0";
    if (isMoney) return "$" + (v >= 1 ? v.toFixed(2) : v.toPrecision(2));
    if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + "k";
    return String(v);
  }

  function cumulative(values) {
    var sum = 0;
    return values.map(function (v) { sum += v; return sum; });
  }

  // One line chart: a series per scenario, compaction events as dashed verticals, a tooltip.
  function lineChart(box, session, pick, opts) {
    box.textContent = "";
    var W = 1100, H = 300, L = 70, R = 16, T = 12, B = 36;
    var scenarios = session.scenarios;
    var turns = scenarios[0].prompt.length;
    var series = scenarios.map(function (s) { return pick(s); });
    var maxY = 0;
    series.forEach(function (values, i) {
      if (hidden[scenarios[i].name]) return;
      values.forEach(function (v) { if (v > maxY) maxY = v; });
    });
    var yTicks = ticks(maxY || 1, 5, false);
    var yMax = yTicks[yTicks.length - 1] || 1;
    var xTicks = ticks(Math.max(turns, 1), 10, true).filter(function (t) { return t >= 1; });
    if (xTicks[0] !== 1) xTicks.unshift(1);
    function x(turn) { return L + (turns > 1 ? (turn - 1) / (turns - 1) : 0.5) * (W - L - R); }
    function y(v) { return T + (1 - v / yMax) * (H - T - B); }

    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": opts.title, "data-chart": opts.id });
    var grid = svg("g", { "class": "grid" });
    var axis = svg("g", { "class": "axis" });
    yTicks.forEach(function (v) {
      grid.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      var label = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" });
      label.textContent = tickLabel(v, opts.money);
      axis.appendChild(label);
    });
    xTicks.forEach(function (t) {
      var label = svg("text", { x: x(t), y: H - B + 16, "text-anchor": "middle",
        "class": "turn-tick" });
      label.textContent = String(t);
      axis.appendChild(label);
    });
    var xLabel = svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" });
    xLabel.textContent = "turn (assistant response)";
    axis.appendChild(xLabel);
    axis.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }));
    root.appendChild(grid);
    root.appendChild(axis);

    scenarios.forEach(function (s, i) {
      if (hidden[s.name]) return;
      Object.keys(s.events).forEach(function (turn) {
        if (s.events[turn].indexOf("compacted") !== 0) return;
        var line = svg("line", { "class": "event", x1: x(+turn), x2: x(+turn), y1: T,
          y2: H - B, stroke: colour(i), "data-scenario": s.name });
        var tip = svg("title");
        tip.textContent = "turn " + turn + " (" + s.label + "): " + s.events[turn];
        line.appendChild(tip);
        root.appendChild(line);
      });
    });
    series.forEach(function (values, i) {
      var s = scenarios[i];
      if (hidden[s.name]) return;
      var d = values.map(function (v, t) {
        return (t ? "L" : "M") + x(t + 1).toFixed(1) + "," + y(v).toFixed(1);
      }).join("");
      // Caching leaves prompt sizes alone: dashed lines keep a pair of equal lines visible.
      var dashed = opts.dashCaching && s.caching;
      root.appendChild(svg("path", { "class": "series" + (dashed ? " dashed" : ""), d: d,
        stroke: colour(i), "data-scenario": s.name }));
    });

    var cursor = svg("line", { "class": "cursor", y1: T, y2: H - B, visibility: "hidden" });
    root.appendChild(cursor);
    var tooltip = el("div", { "class": "tooltip" });
    root.addEventListener("mousemove", function (event) {
      var rect = root.getBoundingClientRect();
      var px = (event.clientX - rect.left) * W / rect.width;
      var turn = turns > 1 ? Math.round((px - L) / (W - L - R) * (turns - 1)) + 1 : 1;
      turn = Math.min(Math.max(turn, 1), turns);
      cursor.setAttribute("x1", x(turn));
      cursor.setAttribute("x2", x(turn));
      cursor.setAttribute("visibility", "visible");
      tooltip.textContent = "";
      tooltip.appendChild(el("div", {}, "turn " + turn));
      scenarios.forEach(function (s, i) {
        if (hidden[s.name]) return;
        var v = series[i][turn - 1];
        var row = el("div");
        row.appendChild(el("span", { "class": "swatch", style: "background:" + colour(i) }));
        row.appendChild(document.createTextNode(s.label + ": " +
          (opts.money ? money(v) : int(v) + " tokens")));
        tooltip.appendChild(row);
        if (s.events[turn]) tooltip.appendChild(el("div", { "class": "muted" },
          "  " + s.events[turn].slice(0, 90)));
      });
      tooltip.style.display = "block";
      var left = (event.clientX - rect.left) + 14;
      if (left > rect.width - 260) left -= 290;
      tooltip.style.left = left + "px";
      tooltip.style.top = (event.clientY - rect.top + 10) + "px";
    });
    root.addEventListener("mouseleave", function () {
      cursor.setAttribute("visibility", "hidden");
      tooltip.style.display = "none";
    });
    box.appendChild(root);
    box.appendChild(tooltip);
  }

  // Where the money goes: one stacked bar per row (a scenario), a segment per part of the cost.
  function moneyChart(box, rows, id) {
    box.textContent = "";
    var W = 1100, L = 400, R = 90, T = 8, row = 22, B = 30;
    var H = T + rows.length * row + B;
    var maxX = 0;
    rows.forEach(function (r) {
      var sum = 0;
      data.breakdown.forEach(function (part) { sum += r.parts[part.key]; });
      if (sum > maxX) maxX = sum;
    });
    var xTicks = ticks(maxX || 1, 6, false);
    var xMax = xTicks[xTicks.length - 1] || 1;
    function x(v) { return L + v / xMax * (W - L - R); }
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img",
      "aria-label": "where the money goes", "data-chart": id });
    var grid = svg("g", { "class": "grid" });
    var axis = svg("g", { "class": "axis" });
    xTicks.forEach(function (v) {
      grid.appendChild(svg("line", { x1: x(v), x2: x(v), y1: T, y2: H - B }));
      var label = svg("text", { x: x(v), y: H - B + 16, "text-anchor": "middle" });
      label.textContent = tickLabel(v, true);
      axis.appendChild(label);
    });
    root.appendChild(grid);
    root.appendChild(axis);
    rows.forEach(function (r, i) {
      var y = T + i * row + 3;
      var name = svg("text", { x: L - 8, y: y + row / 2 + 1, "text-anchor": "end",
        "class": "bar-label" });
      name.textContent = r.label;
      axis.appendChild(name);
      var left = 0;
      data.breakdown.forEach(function (part) {
        var v = r.parts[part.key];
        if (!(v > 0)) return;
        var rect = svg("rect", { "class": "segment", x: x(left), y: y,
          width: Math.max(x(left + v) - x(left), 0.5), height: row - 6, fill: part.colour,
          "data-scenario": r.name, "data-part": part.key });
        var tip = svg("title");
        tip.textContent = r.label + ": " + part.label + " " + money(v);
        rect.appendChild(tip);
        root.appendChild(rect);
        left += v;
      });
      var total = svg("text", { x: x(left) + 4, y: y + row / 2 + 1, "class": "bar-total" });
      total.textContent = money(left);
      axis.appendChild(total);
    });
    box.appendChild(root);
    var key = el("div", { "class": "muted" });
    data.breakdown.forEach(function (part) {
      key.appendChild(el("span", { "class": "swatch", style: "background:" + part.colour }));
      key.appendChild(document.createTextNode(part.label + "  "));
    });
    box.appendChild(key);
  }

  function drawLegend(session) {
    var legend = document.getElementById("legend");
    legend.textContent = "";
    session.scenarios.forEach(function (s, i) {
      var label = el("label");
      var box = el("input", { type: "checkbox", "data-scenario": s.name });
      box.checked = !hidden[s.name];
      box.addEventListener("change", function () {
        hidden[s.name] = !box.checked;
        drawSession();
      });
      label.appendChild(box);
      label.appendChild(el("span", { "class": "swatch", style: "background:" + colour(i) }));
      label.appendChild(document.createTextNode(s.label));
      legend.appendChild(label);
    });
  }

  function drawSession() {
    var session = data.sessions[current];
    var trigger = session.trigger_key ? ", compacts at " + session.trigger + " of the window (" +
      session.trigger_key + ")" : "";
    document.getElementById("session-info").textContent = session.id + ": " + session.format +
      ", " + session.messages + " messages, model " + session.model + ", engine " +
      session.engine + trigger + ", " + session.gaps_text;
    fillTable(document.getElementById("session-table"),
      ["scenario", "requests", "prompt tokens", "cache read", "cache write", "compactions"]
        .concat(data.breakdown.map(function (part) { return part.label; }))
        .concat(["input cost", "total cost", "input saved"]),
      session.scenarios.map(function (s, i) {
        return [{ text: s.label, colour: colour(i) }, String(s.requests), int(s.prompt_tokens),
          int(s.cache_read_tokens), int(s.cache_write_tokens), String(s.compactions)]
          .concat(data.breakdown.map(function (part) { return money(s.breakdown[part.key]); }))
          .concat([money(s.input_cost), money(s.cost), pct(s.input_saved)]);
      }));
    moneyChart(document.getElementById("chart-money"), session.scenarios.map(function (s) {
      return { name: s.name, label: s.label, parts: s.breakdown };
    }), "money");
    drawLegend(session);
    lineChart(document.getElementById("chart-tokens"), session,
      function (s) { return s.prompt; }, { id: "tokens", title: "prompt tokens per request",
        dashCaching: true });
    lineChart(document.getElementById("chart-cost"), session,
      function (s) { return s.turn_cost; }, { id: "cost", title: "cost per request",
        money: true });
    lineChart(document.getElementById("chart-cumulative"), session,
      function (s) { return cumulative(s.turn_cost); }, { id: "cumulative",
        title: "cumulative cost", money: true });
  }

  function savedOf(session) {
    var last = session.scenarios[session.scenarios.length - 1];
    return last.input_saved === null ? "" : ", " + pct(last.input_saved) + " saved";
  }

  // Each session is replayed once per gap distribution.
  function gapCount() {
    var seen = {};
    data.sessions.forEach(function (s) { seen[s.gaps] = true; });
    return Object.keys(seen).length;
  }

  function init() {
    var gaps = gapCount();
    document.getElementById("subtitle").textContent = data.sessions.length / gaps +
      " session(s)" + (gaps > 1 ? " under " + gaps + " gap distributions" : "") + ", " +
      data.sessions[0].scenarios.length + " scenarios; made by " + data.generator +
      ". Hover a chart for the values of a turn; untick a scenario to hide it.";
    if (data.sessions.length > 1) {
      document.getElementById("all-sessions").hidden = false;
      fillTable(document.getElementById("totals-table"),
        ["scenario", "sessions", "prompt tokens", "compactions", "input cost", "total cost",
          "input saved"],
        data.totals.map(function (t, i) {
          return [{ text: t.label, colour: colour(i) }, String(t.sessions), int(t.prompt_tokens),
            String(t.compactions), money(t.input_cost), money(t.cost), pct(t.input_saved)];
        }));
      moneyChart(document.getElementById("chart-money-totals"), data.totals.map(function (t) {
        return { name: t.name, label: t.label, parts: t.breakdown };
      }), "money-totals");
    }
    var gapsInPicker = gaps > 1;
    var picker = document.getElementById("session-picker");
    data.sessions.forEach(function (s, i) {
      picker.appendChild(el("option", { value: String(i) },
        (i + 1) + ". " + s.id + " (" + (gapsInPicker ? s.gaps + " gaps, " : "") + s.messages +
        " messages" + savedOf(s) + ")"));
    });
    picker.addEventListener("change", function () {
      current = +picker.value;
      drawSession();
    });
    drawSession();
    document.body.setAttribute("data-ready", "true");
  }

  init();
})();
