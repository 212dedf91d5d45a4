// A session's steps as nested runs: each agent's run with its messages, tool calls and
// delegations; a delegated worker's run sits inside the delegation that started it.

import { agentColor, badge, duration, h, millis, shortId } from "./dom.js";
import { KIND_LABELS, answerIds, answerOf, content, linkRuns, runSpan, runState, toolName } from "./events.js";

export function renderSteps(events) {
  if (!events.length) return h("p", { class: "empty" }, "No steps yet.");
  const origin = Math.min(...events.map((e) => millis(e.created_at)));
  return h("div", { class: "steps" }, linkRuns(events).map((run) => renderRun(run, origin)));
}

function renderRun(run, origin) {
  const state = runState(run);
  const span = runSpan(run);
  const color = agentColor(run.agent);
  const answered = answerIds(run);
  return h(
    "section",
    { class: `run run-${state}`, dataset: { agent: run.agent, run: run.id }, style: { "--agent": color } },
    h(
      "header",
      { class: "run-head" },
      h("span", { class: "agent-dot" }),
      h("strong", { class: "run-agent" }, run.agent),
      h("span", { class: "muted mono" }, `run ${run.id.startsWith("event:") ? "—" : shortId(run.id)}`),
      h("span", { class: "spacer" }),
      badge(state),
      h("span", { class: "muted" }, duration(span.end - span.start)),
    ),
    h(
      "ol",
      { class: "run-events" },
      run.events.filter((event) => !answered.has(event.id)).map((event) => renderEvent(event, run, origin)),
    ),
  );
}

function renderEvent(event, run, origin) {
  const kind = event.event_type;
  const answer = answerOf(event, run);
  const children = run.children.get(event.id) || [];
  const answerChildren = answer ? run.children.get(answer.id) || [] : [];
  return h(
    "li",
    { class: `step step-${kind}`, dataset: { seq: event.seq, kind } },
    h(
      "div",
      { class: "step-line" },
      h("span", { class: "seq mono" }, `#${event.seq}`),
      h("span", { class: `kind kind-${kind}` }, KIND_LABELS[kind] ?? kind),
      h("span", { class: "offset mono muted" }, `+${duration(millis(event.created_at) - origin)}`),
    ),
    body(event),
    children.length ? h("div", { class: "nested" }, children.map((child) => renderRun(child, origin))) : null,
    answer ? renderAnswer(event, answer) : pending(event),
    answerChildren.length ? h("div", { class: "nested" }, answerChildren.map((child) => renderRun(child, origin))) : null,
  );
}

function body(event) {
  const value = content(event);
  switch (event.event_type) {
    case "tool_call": {
      const args = typeof value === "object" ? (value.arguments ?? {}) : value;
      return h(
        "div",
        { class: "step-body" },
        h("span", { class: "tool-name mono" }, toolName(event)),
        h("code", { class: "args" }, typeof args === "string" ? args : JSON.stringify(args)),
      );
    }
    case "delegation_request":
      return h(
        "div",
        { class: "step-body" },
        h("span", { class: "delegate-to" }, "→ ", h("strong", {}, value.agent ?? "?")),
        h("span", { class: "text" }, value.task ?? ""),
      );
    case "error":
      return h("div", { class: "step-body text error-text" }, event.metadata?.reason ? `${event.metadata.reason}: ` : "", String(value));
    case "input_requested":
      return h("div", { class: "step-body text" }, typeof value === "object" ? (value.question ?? "") : value);
    case "input_received": {
      if (typeof value !== "object") return h("div", { class: "step-body text" }, value);
      const said = value.decision ? `${value.decision}${value.reason ? ` (${value.reason})` : ""}` : value.answer;
      return h("div", { class: "step-body text" }, `${said ?? ""} — ${value.responder ?? "?"}`);
    }
    default:
      return h("div", { class: "step-body text" }, typeof value === "string" ? value : JSON.stringify(value, null, 2));
  }
}

function renderAnswer(event, answer) {
  const took = duration(millis(answer.created_at) - millis(event.created_at));
  const value = content(answer);
  if (answer.event_type === "tool_result") {
    const failed = answer.metadata?.is_error;
    return h(
      "div",
      { class: `answer ${failed ? "answer-failed" : ""}`, dataset: { seq: answer.seq, kind: answer.event_type } },
      h("span", { class: "seq mono" }, `#${answer.seq}`),
      h("span", { class: "kind kind-tool_result" }, failed ? "tool error" : "result"),
      h("span", { class: "muted" }, took),
      h("code", { class: "result" }, typeof value === "string" ? value : JSON.stringify(value)),
    );
  }
  const outcome = typeof value === "object" ? value.outcome : "";
  return h(
    "div",
    { class: `answer ${outcome && outcome !== "completed" ? "answer-failed" : ""}`, dataset: { seq: answer.seq, kind: answer.event_type } },
    h("span", { class: "seq mono" }, `#${answer.seq}`),
    h("span", { class: "kind kind-delegation_response" }, `← ${value.agent ?? ""}`),
    outcome ? badge(outcome) : null,
    h("span", { class: "muted" }, took),
    h("span", { class: "text" }, typeof value === "object" ? (value.content ?? value.error ?? "") : value),
  );
}

function pending(event) {
  if (event.event_type !== "tool_call" && event.event_type !== "delegation_request") return null;
  return h("div", { class: "answer answer-pending" }, h("span", { class: "spinner" }), "waiting for the answer…");
}
