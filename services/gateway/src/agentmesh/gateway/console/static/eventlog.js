// A session's event log: every event in `seq` order, as the memory service stores it. A row
// opens to the whole event.

import { agentColor, clock, duration, h, millis, shortId } from "./dom.js";
import { KIND_LABELS, summary } from "./events.js";

export function renderEventLog(events, opened) {
  if (!events.length) return h("p", { class: "empty" }, "No events yet.");
  const origin = millis(events[0].created_at);
  return h(
    "table",
    { class: "table event-log" },
    h(
      "thead",
      {},
      h("tr", {}, ["seq", "time", "+", "agent", "type", "what", "run", "delegation"].map((name) => h("th", {}, name))),
    ),
    h(
      "tbody",
      {},
      events.flatMap((event) => {
        const row = h(
          "tr",
          {
            class: "event-row",
            dataset: { seq: event.seq, kind: event.event_type },
            onclick: () => {
              if (opened.has(event.id)) opened.delete(event.id);
              else opened.add(event.id);
              detail.hidden = !opened.has(event.id);
            },
          },
          h("td", { class: "mono seq-cell" }, event.seq),
          h("td", { class: "mono muted" }, clock(event.created_at)),
          h("td", { class: "mono muted" }, duration(millis(event.created_at) - origin)),
          h("td", {}, h("span", { class: "agent-dot", style: { "--agent": agentColor(event.agent) } }), event.agent),
          h("td", {}, h("span", { class: `kind kind-${event.event_type}` }, KIND_LABELS[event.event_type] ?? event.event_type)),
          h("td", { class: "what" }, summary(event)),
          h("td", { class: "mono muted", title: event.run_id ?? "" }, shortId(event.run_id)),
          h("td", { class: "mono muted", title: event.delegation_id ?? "" }, shortId(event.delegation_id)),
        );
        const detail = h(
          "tr",
          { class: "event-detail", hidden: !opened.has(event.id) },
          h("td", { colspan: 8 }, h("pre", {}, JSON.stringify(event, null, 2))),
        );
        return [row, detail];
      }),
    ),
  );
}
