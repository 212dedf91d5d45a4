// A person in the loop: the requests for input that suspended runs wait for, each as a card to
// answer — Approve / Deny (with an optional reason) for an approval, an answer box for a question —
// through the REST routes `…/input-requests[/{id}/respond]`. Once answered, a card follows the
// resumed run in the session's events (from the request's `seq`) and shows how it came out: its
// answer, its failure, or that it asks again. The Requests page lists a project's pending ones,
// live; the chat shows the same cards in the conversation.

import { enc } from "./api.js";
import { ago, badge, dateTime, every, fill, h } from "./dom.js";
import { content } from "./events.js";

const REFRESH_MS = 2000;
const FOLLOW_MS = 700;
const FOLLOW_FOR_MS = 5 * 60 * 1000;

export function requestsPath(projectId) {
  return `/api/v1/projects/${enc(projectId)}/input-requests`;
}

/** Every pending request of the project (or of one session), oldest first. */
export async function pendingRequests(api, projectId, sessionId = null) {
  const requests = [];
  let token = "";
  do {
    const query = new URLSearchParams({ state: "pending", page_size: "1000" });
    if (sessionId) query.set("session_id", sessionId);
    if (token) query.set("page_token", token);
    const body = await api.get(`${requestsPath(projectId)}?${query}`);
    requests.push(...body.data);
    token = body.next_page_token;
  } while (token);
  return requests;
}

/**
 * A card for one request. `onOutcome({kind, text})` runs once the resumed run came out:
 * `answered` (its answer), `failed` (the error), `asks` (it asks again), or `waiting` (another of
 * its requests is still pending).
 */
export function requestCard(api, projectId, request, { onOutcome = () => {}, showSession = true } = {}) {
  const approval = request.kind === "approval";
  const status = h("div", { class: "request-status", role: "status" });
  const error = h("div", { class: "alert", hidden: true, role: "alert" });
  const reason = h("input", { type: "text", name: "reason", placeholder: "Reason (optional; the model is told it on a denial)" });
  const answer = h("textarea", { name: "answer", rows: 2, placeholder: "Your answer…" });
  const buttons = approval
    ? [
        h("button", { type: "button", class: "button small primary", dataset: { action: "approve" }, onclick: () => respond({ decision: "approve", ...said() }) }, "Approve"),
        h("button", { type: "button", class: "button small danger", dataset: { action: "deny" }, onclick: () => respond({ decision: "deny", ...said() }) }, "Deny"),
      ]
    : [h("button", { type: "submit", class: "button small primary", dataset: { action: "answer" } }, "Answer")];
  const said = () => (reason.value.trim() ? { reason: reason.value.trim() } : {});
  const form = h(
    "form",
    {
      class: "request-form",
      onsubmit: (event) => {
        event.preventDefault();
        if (!approval && answer.value.trim()) respond({ answer: answer.value.trim() });
      },
    },
    approval ? reason : answer,
    h("div", { class: "request-actions" }, buttons),
  );
  if (!approval) {
    answer.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }
  const card = h(
    "article",
    { class: `request request-${request.kind}`, dataset: { request: request.id, kind: request.kind } },
    h(
      "header",
      { class: "request-head" },
      badge(request.kind, "asking"),
      h("strong", {}, request.agent),
      h("span", { class: "muted" }, approval ? "asks for an approval" : "asks"),
      h("span", { class: "spacer" }),
      h("span", { class: "muted small", title: `expires ${dateTime(request.expires_at)}` }, `asked ${ago(request.created_at)}`),
    ),
    approval
      ? h("div", { class: "request-body" }, h("span", { class: "tool-name mono" }, request.tool), h("code", { class: "args" }, JSON.stringify(request.arguments ?? {})))
      : h("div", { class: "request-body request-question" }, request.question),
    showSession ? h("div", { class: "muted small" }, "session ", h("a", { class: "mono", href: `#/projects/${enc(projectId)}/sessions/${enc(request.session_id)}` }, request.session_id)) : null,
    error,
    form,
    status,
  );

  const respond = async (body) => {
    for (const control of form.elements) control.disabled = true;
    error.hidden = true;
    let answered;
    try {
      answered = await api.post(`${requestsPath(projectId)}/${enc(request.id)}/respond`, body);
    } catch (failure) {
      fill(error, failure.message).hidden = false;
      // Answered elsewhere (409) or expired: nothing more to do here.
      if (failure.status !== 409) for (const control of form.elements) control.disabled = false;
      return;
    }
    form.hidden = true;
    const given = answered.response;
    card.classList.add("request-answered");
    fill(status, h("span", { class: "spinner" }), `${describeResponse(given)} — the run resumes…`);
    // The run resumes only once none of its requests is pending: until then it has nothing to show.
    const others = (await pendingRequests(api, projectId, request.session_id).catch(() => [])).filter((other) => other.run_id === request.run_id);
    const outcome = others.length ? { kind: "waiting", text: "" } : await follow(api, projectId, request);
    fill(status, outcomeLine(given, outcome));
    card.dataset.outcome = outcome.kind;
    onOutcome(outcome);
  };
  return card;
}

function describeResponse(response) {
  if (response.decision === "approve") return "Approved";
  if (response.decision === "deny") return response.reason ? `Denied (${response.reason})` : "Denied";
  return `Answered “${response.answer}”`;
}

function outcomeLine(given, outcome) {
  const said = describeResponse(given);
  switch (outcome.kind) {
    case "answered":
      return h("span", {}, `${said}. `, badge("completed"), " ", h("span", { class: "outcome-text" }, outcome.text));
    case "failed":
      return h("span", { class: "error-text" }, `${said}. The run failed: ${outcome.text}`);
    case "asks":
      return h("span", {}, `${said}. The run asks again: `, h("span", { class: "outcome-text" }, outcome.text));
    case "waiting":
      return `${said}. The run waits for its other requests.`;
    default:
      return `${said}. The run has not come out yet.`;
  }
}

/** How the resumed run came out, from the session's events after the request's own. */
async function follow(api, projectId, request) {
  const until = Date.now() + FOLLOW_FOR_MS;
  let after = request.seq;
  while (Date.now() < until) {
    const events = await api.events(projectId, request.session_id, after).catch(() => []);
    for (const event of events) {
      after = Math.max(after, event.seq);
      if (event.run_id !== request.run_id) continue;
      if (event.event_type === "agent_response") return { kind: "answered", text: String(content(event)) };
      if (event.event_type === "error" && event.metadata?.code) return { kind: "failed", text: String(content(event)) };
      if (event.event_type === "input_requested") {
        const asked = content(event);
        return { kind: "asks", text: asked.question ?? "" };
      }
    }
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
  }
  return { kind: "unknown", text: "" };
}

/** The Requests page: the project's pending requests, live; each answered in place. */
export async function requestsView(api, projectId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const list = h("div", { class: "request-list" });
  const empty = h("p", { class: "empty" }, "Nothing waits for a person.");
  const count = h("span", { class: "count" });
  const cards = new Map();
  const refresh = async () => {
    const pending = await pendingRequests(api, projectId);
    const ids = new Set(pending.map((request) => request.id));
    for (const [id, card] of cards) {
      // Answered elsewhere: gone. Answered here: kept, with how the run came out.
      if (!ids.has(id) && !card.classList.contains("request-answered")) {
        card.remove();
        cards.delete(id);
      }
    }
    for (const request of pending) {
      if (cards.has(request.id)) continue;
      const card = requestCard(api, projectId, request, { onOutcome: () => refresh() });
      cards.set(request.id, card);
      list.append(card);
    }
    empty.hidden = cards.size > 0;
    fill(count, pending.length ? String(pending.length) : "");
  };
  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, "Requests ", count), h("p", { class: "muted" }, `What runs in ${project.name} wait for: approvals of tool calls and questions for a person.`)),
      h("div", { class: "head-actions" }, h("a", { class: "button", href: `#/projects/${enc(projectId)}` }, "Back to the project")),
    ),
    h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Pending"), h("span", { class: "live" }, h("span", { class: "live-dot" }), "live")), empty, list),
  );
  await refresh();
  every(REFRESH_MS, page, refresh);
  return { el: page, title: `Requests · ${project.name}`, project };
}
