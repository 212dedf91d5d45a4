// A session's trace as a waterfall: a row per run (indented below the delegation that started
// it), per tool call and per delegation, placed on one time axis from the events' timestamps. A
// run's ticks mark its events; an unanswered call grows until now.

import { agentColor, duration, h, millis, shortId } from "./dom.js";
import { answerOf, linkRuns, runSpan, runState, toolName, walk } from "./events.js";

export function renderWaterfall(events) {
  if (!events.length) return h("p", { class: "empty" }, "No events yet.");
  const runs = linkRuns(events);
  const rows = [];
  runs.forEach((run) => rowsOf(run, 0, rows));
  const origin = Math.min(...events.map((e) => millis(e.created_at)));
  const end = Math.max(...rows.map((row) => row.end));
  const total = Math.max(end - origin, 1);
  const place = (ms) => `${(((ms - origin) / total) * 100).toFixed(3)}%`;
  const width = (a, b) => `${Math.max(((b - a) / total) * 100, 0.4).toFixed(3)}%`;
  const traces = [...new Set(events.map((e) => e.trace_id).filter(Boolean))];
  const agents = new Set(events.map((e) => e.agent));
  const runCount = [...walk(runs)].length;
  return h(
    "div",
    { class: "waterfall" },
    h(
      "div",
      { class: "wf-summary" },
      h("span", {}, h("strong", {}, duration(end - origin)), " total"),
      h("span", {}, `${runCount} run${runCount === 1 ? "" : "s"}`),
      h("span", {}, `${agents.size} agent${agents.size === 1 ? "" : "s"}`),
      h("span", {}, `${events.length} events`),
      traces.length ? h("span", { class: "mono muted", title: traces.join("\n") }, `trace ${traces.map(shortId).join(", ")}`) : null,
    ),
    h(
      "div",
      { class: "wf-grid" },
      h("div", { class: "wf-row wf-axis" }, h("div", { class: "wf-label" }), h("div", { class: "wf-track" }, ticks(total))),
      rows.map((row) =>
        h(
          "div",
          { class: `wf-row wf-${row.kind}`, dataset: { kind: row.kind, agent: row.agent } },
          h(
            "div",
            { class: "wf-label", style: { paddingLeft: `${8 + row.depth * 16}px` }, title: row.title },
            row.kind === "run" ? h("span", { class: "agent-dot", style: { "--agent": agentColor(row.agent) } }) : null,
            h("span", { class: "wf-name" }, row.label),
          ),
          h(
            "div",
            { class: "wf-track" },
            h(
              "div",
              {
                class: `wf-bar ${row.pending ? "wf-pending" : ""}`,
                style: { left: place(row.start), width: width(row.start, row.end), "--agent": agentColor(row.agent) },
                title: `${row.title}\n${duration(row.end - row.start)} · from +${duration(row.start - origin)}`,
              },
            ),
            (row.marks || []).map((mark) =>
              h("span", { class: "wf-mark", style: { left: place(mark.at) }, title: mark.title }),
            ),
            h("span", { class: "wf-duration", style: { left: place(row.end) } }, duration(row.end - row.start)),
          ),
        ),
      ),
    ),
  );
}

function rowsOf(run, depth, rows) {
  const now = Date.now();
  const span = runSpan(run);
  const running = runState(run) === "running";
  rows.push({
    kind: "run",
    agent: run.agent,
    depth,
    label: run.agent,
    title: `${run.agent} · run ${run.id} · span ${run.events[0].span_id ?? "—"}`,
    start: span.start,
    end: running ? Math.max(span.end, now) : span.end,
    pending: running,
    marks: run.events.map((e) => ({ at: millis(e.created_at), title: `#${e.seq} ${e.event_type}` })),
  });
  for (const event of run.events) {
    const answer = answerOf(event, run);
    const start = millis(event.created_at);
    const end = answer ? millis(answer.created_at) : now;
    if (event.event_type === "tool_call") {
      const name = toolName(event);
      rows.push({ kind: "tool", agent: run.agent, depth: depth + 1, label: `⚙ ${name}`, title: `tool ${name} (#${event.seq})`, start, end, pending: !answer });
    } else if (event.event_type === "delegation_request") {
      const target = event.metadata?.target_agent ?? "?";
      rows.push({ kind: "delegation", agent: target, depth: depth + 1, label: `→ ${target}`, title: `delegation to ${target} (#${event.seq})`, start, end, pending: !answer });
    }
    for (const anchor of [event, answer].filter(Boolean)) {
      for (const child of run.children.get(anchor.id) || []) rowsOf(child, depth + 2, rows);
    }
  }
}

function ticks(total) {
  const step = niceStep(total / 6);
  const marks = [];
  for (let at = 0; at <= total * 1.0001; at += step) {
    const label = at === 0 ? "0" : duration(at);
    marks.push(h("span", { class: "wf-tick", style: { left: `${((at / total) * 100).toFixed(3)}%` } }, label));
  }
  return marks;
}

function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 0.001)));
  for (const factor of [1, 2, 5, 10]) if (raw <= factor * power) return factor * power;
  return 10 * power;
}
