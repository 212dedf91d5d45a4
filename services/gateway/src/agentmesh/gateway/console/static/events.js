// A session's events as runs: the same rebuilding as `agentmesh trace`. Events are grouped into
// runs by `run_id`; a run hangs below the event of another run that started it (its first
// event's `parent_event_id`, else the `delegation_request` with its `delegation_id`); a
// `tool_result` belongs below its `tool_call`, a `delegation_response` below its request.

import { millis, short } from "./dom.js";

export function content(event) {
  const text = event.content ?? "";
  if (typeof text === "string" && (text.startsWith("{") || text.startsWith("["))) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** The session's runs linked into trees; the top-level runs in order. */
export function linkRuns(events) {
  const ordered = [...events].sort((a, b) => a.seq - b.seq);
  const runs = new Map();
  const runOfEvent = new Map();
  for (const event of ordered) {
    const runId = event.run_id || `event:${event.id}`;
    if (!runs.has(runId)) runs.set(runId, { id: runId, events: [], children: new Map() });
    runs.get(runId).events.push(event);
    runOfEvent.set(event.id, runId);
  }
  const requests = new Map(
    ordered.filter((e) => e.event_type === "delegation_request" && e.delegation_id).map((e) => [e.delegation_id, e]),
  );
  const top = [];
  for (const run of runs.values()) {
    run.agent = run.events[0].agent;
    const anchor = anchorOf(run, requests, runOfEvent);
    if (anchor === null) top.push(run);
    else {
      const parent = runs.get(runOfEvent.get(anchor));
      if (!parent.children.has(anchor)) parent.children.set(anchor, []);
      parent.children.get(anchor).push(run);
    }
  }
  // Links that loop (only in corrupt data) would hide their runs: show those at the top.
  const seen = new Set();
  const visit = (run) => {
    if (seen.has(run.id)) return;
    seen.add(run.id);
    for (const children of run.children.values()) children.forEach(visit);
  };
  top.forEach(visit);
  for (const run of runs.values()) if (!seen.has(run.id)) top.push(run);
  return top;
}

function anchorOf(run, requests, runOfEvent) {
  const parentId = run.events[0].parent_event_id;
  if (parentId && runOfEvent.has(parentId) && runOfEvent.get(parentId) !== run.id) return parentId;
  for (const event of run.events) {
    const request = requests.get(event.delegation_id);
    if (request && runOfEvent.get(request.id) !== run.id) return request.id;
  }
  return null;
}

/** The event that answers a tool call or a delegation request in the same run, if any yet. */
export function answerOf(event, run) {
  const kind = { tool_call: "tool_result", delegation_request: "delegation_response" }[event.event_type];
  if (!kind) return undefined;
  return run.events.find((e) => e.event_type === kind && e.parent_event_id === event.id);
}

/** Ids of the events shown below the event they answer. */
export function answerIds(run) {
  const ids = new Set(run.events.map((e) => e.id));
  return new Set(
    run.events
      .filter((e) => (e.event_type === "tool_result" || e.event_type === "delegation_response") && ids.has(e.parent_event_id))
      .map((e) => e.id),
  );
}

/** "completed", "failed" or "running", from the run's last event. */
export function runState(run) {
  const last = run.events[run.events.length - 1];
  if (last.event_type === "agent_response" || last.event_type === "escalation") return "completed";
  if (last.event_type === "error") return "failed";
  return "running";
}

/** First and last event time of a run and of every run below it. */
export function runSpan(run) {
  let start = millis(run.events[0].created_at);
  let end = millis(run.events[run.events.length - 1].created_at);
  for (const children of run.children.values()) {
    for (const child of children) {
      const span = runSpan(child);
      start = Math.min(start, span.start);
      end = Math.max(end, span.end);
    }
  }
  return { start, end };
}

/** Every run of a tree, depth first. */
export function* walk(runs) {
  for (const run of runs) {
    yield run;
    for (const children of run.children.values()) yield* walk(children);
  }
}

export const KIND_LABELS = {
  user_message: "user message",
  agent_response: "response",
  tool_call: "tool call",
  tool_result: "tool result",
  delegation_request: "delegation",
  delegation_response: "delegation result",
  task_delegation_received: "task received",
  escalation: "escalation",
  error: "error",
  input_requested: "asks a person",
  input_received: "person's answer",
  context_compacted: "history summarized",
};

/** One line saying what an event was. */
export function summary(event) {
  const body = content(event);
  const metadata = event.metadata || {};
  switch (event.event_type) {
    case "delegation_request":
      return typeof body === "object" ? `→ ${body.agent ?? "?"}: ${short(body.task ?? "")}` : short(body);
    case "delegation_response":
      return typeof body === "object"
        ? `← ${body.agent ?? "?"} [${body.outcome ?? "?"}] ${short(body.content ?? body.error ?? "")}`
        : short(body);
    case "tool_call": {
      const name = toolName(event);
      const args = typeof body === "object" ? (body.arguments ?? body) : body;
      return `${name}(${short(typeof args === "string" ? args : JSON.stringify(args), 80)})`;
    }
    case "error":
      return metadata.reason ? `${metadata.reason}: ${short(body)}` : short(body);
    default:
      return short(typeof body === "string" ? body : JSON.stringify(body));
  }
}

export function toolName(event) {
  const body = content(event);
  const metadata = event.metadata || {};
  return metadata.tool || metadata.tool_name || (typeof body === "object" && body.name) || "tool";
}
