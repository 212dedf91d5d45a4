// A session's event log: every event in `seq` order, as the memory service stores it. A row
// opens to the whole event and, given `onFork`, a button that forks the session at that event.

import { agentColor, clock, duration, h, millis, shortId } from "./dom.js";
import { KIND_LABELS, summary } from "./events.js";

const COLUMNS = ["seq", "time", "offset", "agent", "type", "what", "run", "delegation"];
// Beside a conversation there is less room: the clock time and the delegation id go.
const COMPACT = new Set(["time", "delegation"]);

/**
 * The log as a table; `compact` leaves out the columns a narrow panel has no room for; `onFork`
 * (called with the event) puts a "Fork here" button in each opened event.
 */
export function renderEventLog(events, opened, { compact = false, onFork = null } = {}) {
  if (!events.length) return h("p", { class: "empty" }, "No events yet.");
  const origin = millis(events[0].created_at);
  const columns = COLUMNS.filter((name) => !(compact && COMPACT.has(name)));
  const cell = (name, props, ...children) => (columns.includes(name) ? h("td", { class: `col-${name}`, ...props }, ...children) : null);
  return h(
    "table",
    { class: `table event-log ${compact ? "compact" : ""}` },
    h(
      "thead",
      {},
      h("tr", {}, columns.map((name) => h("th", { class: `col-${name}` }, name))),
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
          cell("seq", { class: "col-seq mono" }, event.seq),
          cell("time", { class: "col-time mono muted" }, clock(event.created_at)),
          cell("offset", { class: "col-offset mono muted" }, duration(millis(event.created_at) - origin)),
          cell("agent", {}, h("span", { class: "agent-dot", style: { "--agent": agentColor(event.agent) } }), event.agent),
          cell("type", {}, h("span", { class: `kind kind-${event.event_type}` }, KIND_LABELS[event.event_type] ?? event.event_type)),
          cell("what", { title: summary(event) }, summary(event)),
          cell("run", { class: "col-run mono muted", title: event.run_id ?? "" }, shortId(event.run_id)),
          cell("delegation", { class: "col-delegation mono muted", title: event.delegation_id ?? "" }, shortId(event.delegation_id)),
        );
        const detail = h(
          "tr",
          { class: "event-detail", hidden: !opened.has(event.id) },
          h(
            "td",
            { colspan: columns.length },
            onFork
              ? h("button", { class: "button small", dataset: { action: "fork", seq: event.seq }, title: "A new session that sees the history up to this event", onclick: () => onFork(event) }, `Fork here (seq ${event.seq})`)
              : null,
            h("pre", {}, JSON.stringify(event, null, 2)),
          ),
        );
        return [row, detail];
      }),
    ),
  );
}
