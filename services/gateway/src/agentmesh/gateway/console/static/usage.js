// A project's usage (docs/usage.md): what its runs' model calls used and cost per UTC day, from
// the cost ledger (`GET /api/v1/projects/{id}/usage`), as a bar chart of stacked bars — one bar a
// day, one colour per agent, model or user — drawn as inline SVG, and the groups' totals.

import { enc } from "./api.js";
import { h, shortId } from "./dom.js";

const DAYS = 30;
const DIMENSIONS = { agent: "Agent", model: "Model", user: "User" };
// Colours for the groups with the most use, in order; the rest share the last, as "others".
const PALETTE = ["#4f46e5", "#0e9f6e", "#d97706", "#db2777", "#0284c7", "#7c3aed", "#65a30d", "#94a3b8"];
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 720;
const HEIGHT = 220;
const AXIS = 52; // room for the value axis on the left
const FOOT = 22; // room for the days under the bars

/** An SVG element (attributes only: the page's Content-Security-Policy allows no style attribute). */
function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** The last `DAYS` UTC days, oldest first, as YYYY-MM-DD. */
function lastDays(now = new Date()) {
  return Array.from({ length: DAYS }, (_, index) => new Date(now.getTime() - (DAYS - 1 - index) * 86400000).toISOString().slice(0, 10));
}

const MEASURES = {
  tokens: {
    label: "Tokens",
    of: (group) => group.input_tokens + group.output_tokens,
    show: (value) => `${Math.round(value).toLocaleString()} tokens`,
    axis: (value) => new Intl.NumberFormat("en", { notation: "compact", maximumSignificantDigits: 3 }).format(value),
  },
  cost: {
    label: "Cost (US$)",
    of: (group) => group.priced_cost,
    show: (value) => `$${value.toFixed(value >= 1 ? 2 : 4)}`,
    axis: (value) => `$${value >= 100 ? Math.round(value) : Number(value.toPrecision(2))}`,
  },
};

/** The key and the label of a group for a dimension. */
function groupKey(group, dimension) {
  if (dimension === "agent") return [group.agent_id, group.agent || shortId(group.agent_id)];
  if (dimension === "model") return [group.model, group.model];
  return [group.user_id, group.user_id ? shortId(group.user_id) : "—"];
}

/** The chart: a stacked bar per day, a segment per series, each with a title saying what it is. */
export function usageChart(days, series, rows, measure) {
  const most = Math.max(0, ...days.map((day) => series.reduce((sum, item) => sum + (rows.get(`${day} ${item.key}`) ?? 0), 0)));
  const top = most > 0 ? most : 1;
  const plot = HEIGHT - FOOT;
  const slot = (WIDTH - AXIS) / days.length;
  const bars = days.map((day, index) => {
    let y = plot;
    const x = AXIS + index * slot + slot * 0.15;
    const segments = series.map((item) => {
      const value = rows.get(`${day} ${item.key}`) ?? 0;
      if (!value) return null;
      const height = Math.max(1, (value / top) * (plot - 8));
      y -= height;
      return svg("rect", { x: x.toFixed(1), y: y.toFixed(1), width: (slot * 0.7).toFixed(1), height: height.toFixed(1), fill: item.colour, "data-day": day, "data-group": item.label }, svg("title", {}, `${day} · ${item.label}: ${measure.show(value)}`));
    });
    // Every fifth day named, and the last (today's) under its bar's right edge, inside the chart.
    const last = index === days.length - 1;
    const label = index % 5 === DAYS % 5 || last ? svg("text", { x: (x + slot * (last ? 0.7 : 0.35)).toFixed(1), y: HEIGHT - 6, "text-anchor": last ? "end" : "middle", class: "chart-label" }, day.slice(5)) : null;
    return svg("g", { "data-day": day }, segments, label);
  });
  const ticks = [0, 0.5, 1].map((share) => {
    const y = plot - share * (plot - 8);
    return svg("g", {}, svg("line", { x1: AXIS, x2: WIDTH, y1: y, y2: y, class: "chart-grid" }), svg("text", { x: AXIS - 6, y: y + 4, "text-anchor": "end", class: "chart-label" }, measure.axis(top * share)));
  });
  return svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "usage-chart", role: "img", "aria-label": `${measure.label} per day, last ${DAYS} days`, "data-chart": "usage" }, ticks, bars);
}

export async function usageView(api, projectId, query) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const dimension = DIMENSIONS[query.get("by")] ? query.get("by") : "agent";
  const measure = MEASURES[query.get("measure")] ? query.get("measure") : "tokens";
  const days = lastDays();
  const range = `start_day=${days[0]}&end_day=${days[days.length - 1]}`;
  const summary = await api.get(`/api/v1/projects/${enc(projectId)}/usage?group_by=day&group_by=${dimension}&${range}`);
  const of = MEASURES[measure].of;

  // Each group's total over the range, most first; past the palette they are drawn as one.
  const totals = new Map();
  for (const group of summary.groups) {
    const [key, label] = groupKey(group, dimension);
    const total = totals.get(key) ?? { key, label, value: 0, tokens: 0, cost: 0, known: true, calls: 0 };
    total.value += of(group);
    total.tokens += group.input_tokens + group.output_tokens;
    total.cost += group.priced_cost;
    total.known &&= group.cost !== null;
    total.calls += group.calls;
    totals.set(key, total);
  }
  const ranked = [...totals.values()].sort((a, b) => b.value - a.value || a.label.localeCompare(b.label));
  const kept = ranked.slice(0, PALETTE.length - 1).map((item, index) => ({ ...item, colour: PALETTE[index] }));
  const others = ranked.length >= PALETTE.length ? [{ key: "\u0000others", label: "others", colour: PALETTE[PALETTE.length - 1] }] : [];
  const seriesOf = new Map(ranked.map((item, index) => [item.key, index < kept.length ? item.key : "\u0000others"]));
  const rows = new Map();
  for (const group of summary.groups) {
    const slot = `${group.day} ${seriesOf.get(groupKey(group, dimension)[0])}`;
    rows.set(slot, (rows.get(slot) ?? 0) + of(group));
  }

  const link = (by, shown) => `#/projects/${enc(projectId)}/usage?by=${by}&measure=${shown}`;
  const total = summary.total;
  const cost = total.cost === null ? `$${total.priced_cost.toFixed(4)} priced (the rest unknown: ${total.unpriced_models.join(", ")})` : `$${total.cost.toFixed(4)}`;
  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, `${project.name}: usage`), h("p", { class: "muted" }, `Model calls of the project's finished runs, per UTC day, from ${days[0]} to ${days[days.length - 1]}.`)),
      h("div", { class: "head-actions" }, h("a", { class: "button", href: `#/projects/${enc(projectId)}` }, "Back to the project")),
    ),
    h(
      "section",
      { class: "card" },
      h(
        "div",
        { class: "card-head usage-controls" },
        h("div", { class: "segmented", role: "group", "aria-label": "Group by" }, Object.entries(DIMENSIONS).map(([by, label]) => h("a", { class: `button small${by === dimension ? " primary" : ""}`, href: link(by, measure), dataset: { by }, "aria-current": by === dimension ? "true" : null }, label))),
        h("div", { class: "segmented", role: "group", "aria-label": "Measure" }, Object.entries(MEASURES).map(([shown, item]) => h("a", { class: `button small${shown === measure ? " primary" : ""}`, href: link(dimension, shown), dataset: { measure: shown } }, item.label))),
      ),
      h("p", { class: "usage-total", dataset: { total: "" } }, `${total.calls.toLocaleString()} calls · ${(total.input_tokens + total.output_tokens).toLocaleString()} tokens · ${cost}`),
      ranked.length ? usageChart(days, [...kept, ...others], rows, MEASURES[measure]) : h("p", { class: "empty" }, "No model calls in these days."),
      summary.truncated ? h("p", { class: "muted small" }, "More groups than one answer holds: the chart shows the first 1,000.") : null,
      h(
        "table",
        { class: "table usage-table" },
        h("thead", {}, h("tr", {}, ["", DIMENSIONS[dimension], "Calls", "Tokens", "Cost"].map((name) => h("th", {}, name)))),
        h(
          "tbody",
          {},
          ranked.map((item, index) =>
            h(
              "tr",
              { dataset: { group: item.label } },
              h("td", {}, h("span", { class: "swatch", style: { background: PALETTE[Math.min(index, PALETTE.length - 1)] } })),
              h("td", { class: "mono" }, item.label),
              h("td", {}, item.calls.toLocaleString()),
              h("td", {}, item.tokens.toLocaleString()),
              h("td", {}, item.known ? `$${item.cost.toFixed(4)}` : h("span", { class: "muted", title: "a model called has no price" }, `unknown ($${item.cost.toFixed(4)} priced)`)),
            ),
          ),
        ),
      ),
    ),
  );
  return { el: page, title: `${project.name} usage`, project };
}
