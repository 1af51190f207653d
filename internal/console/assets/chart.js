// The chart of the timers due over the next hour, drawn as SVG elements
// (attributes only: the page's policy allows no inline style).

import { count } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(name, attrs, text) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// drawChart draws into the svg element one bar for the timers due
// already, then one per bucket of the next hour, and says it in words in
// the summary element. due is the overview's due chart.
export function drawChart(chart, summary, due) {
  const width = 390, height = 160, left = 8, right = 8, top = 16, bottom = 22;
  const minutes = due.bucketSeconds / 60;
  const bars = [{ count: due.overdue, label: "due already", overdue: true }].concat(
    due.counts.map((n, i) => ({ count: n, label: "due in " + i * minutes + "–" + (i + 1) * minutes + " min" })));
  const slot = (width - left - right) / bars.length;
  const plot = height - top - bottom;
  const most = Math.max(1, ...bars.map((b) => b.count));
  const nodes = [svg("line", { class: "axis", x1: left, x2: width - right, y1: top + plot, y2: top + plot })];
  bars.forEach((b, i) => {
    const h = b.count ? Math.max(2, (b.count / most) * plot) : 0;
    const x = left + i * slot + slot * 0.15;
    const rect = svg("rect", {
      class: "bar-rect" + (b.overdue ? " overdue" : ""), x, y: top + plot - h, width: slot * 0.7, height: h,
      "data-count": b.count,
    });
    rect.append(svg("title", {}, count(b.count) + " " + b.label));
    nodes.push(rect);
    if (b.count) {
      nodes.push(svg("text", { x: x + slot * 0.35, y: top + plot - h - 3, "text-anchor": "middle", "font-size": 9 }, count(b.count)));
    }
  });
  const ticks = { 0: "now", 3: "+15m", 6: "+30m", 9: "+45m", 12: "+60m" };
  for (const [k, label] of Object.entries(ticks)) {
    const last = Number(k) === bars.length - 1;
    const x = left + (Number(k) + 1) * slot;
    nodes.push(svg("text", { x, y: height - 6, "text-anchor": last ? "end" : "middle", "font-size": 10 }, label));
  }
  chart.replaceChildren(...nodes);

  const total = due.overdue + due.counts.reduce((a, b) => a + b, 0);
  let text = count(total) + " due within the hour, " + count(due.overdue) + " of them already due.";
  if (due.partial) text += " At least: the chart reads a bounded number of timers.";
  summary.textContent = text;
}
