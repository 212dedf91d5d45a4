// Chat with one agent: the conversation on the left, streamed through the OpenAI-compatible
// endpoint (the answer's text arrives as it is written); on the right every step of the session
// live — the agent's and its workers' — from the session's events. A run that asks a person
// (an `input_requested` event) shows its request in the conversation as a card to answer
// (requests.js); the resumed run's answer follows it.

import { enc } from "./api.js";
import { badge, every, fill, h } from "./dom.js";
import { linkRuns } from "./events.js";
import { pendingRequests, requestCard } from "./requests.js";
import { SessionPanel } from "./session.js";

const POLL_RUNNING_MS = 250;
const POLL_IDLE_MS = 2000;

export async function chatView(api, projectId, agentId, sessionId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const agent = await api.get(`/api/v1/projects/${enc(projectId)}/agents/${enc(agentId)}`);
  const model = `${project.slug}/${agent.slug ?? agent.name}`;
  const panel = new SessionPanel(api, projectId, sessionId, { compact: true });
  const status = h("span", { class: "agent-status" }, badge(agent.status));
  const sessionLabel = h("span", { class: "mono muted session-id" });
  const messages = h("div", { class: "messages", "aria-live": "polite" });
  const input = h("textarea", { name: "message", rows: 2, placeholder: `Message ${agent.name}… (Enter to send, Shift+Enter for a new line)` });
  const send = h("button", { type: "submit", class: "button primary", dataset: { action: "send" } }, "Send");
  const stop = h("button", { type: "button", class: "button", hidden: true, dataset: { action: "stop" } }, "Stop");
  let running = null;
  let lastPoll = 0;
  const asked = new Set(); // requests whose card is in the conversation
  let seenAsks = 0; // input_requested events of the session looked at

  // The session's pending requests as cards, once each; the resumed run's outcome as a reply.
  const showRequests = async () => {
    if (!panel.sessionId) return;
    const pending = await pendingRequests(api, projectId, panel.sessionId).catch(() => []);
    for (const request of pending) {
      if (asked.has(request.id)) continue;
      asked.add(request.id);
      const card = requestCard(api, projectId, request, {
        showSession: false,
        onOutcome: (outcome) => {
          if (outcome.kind === "answered") bubble("assistant", outcome.text);
          if (outcome.kind === "failed") bubble("assistant", outcome.text).element.classList.add("message-error");
          lastPoll = 0;
          showRequests();
        },
      });
      messages.append(h("div", { class: "message message-request" }, card));
      messages.scrollTop = messages.scrollHeight;
    }
  };
  // A new `input_requested` event (this chat's, or another client's in the session) shows its card.
  const noticeAsks = async () => {
    const asks = panel.events.filter((event) => event.event_type === "input_requested").length;
    if (asks === seenAsks) return;
    seenAsks = asks;
    await showRequests();
  };

  const showSession = () => {
    fill(
      sessionLabel,
      panel.sessionId
        ? h("a", { href: `#/projects/${enc(projectId)}/sessions/${enc(panel.sessionId)}`, title: "open the session" }, `session ${panel.sessionId}`)
        : "new session",
    );
  };

  const bubble = (role, text = "") => {
    const body = h("div", { class: "bubble-text" }, text);
    const element = h("div", { class: `message message-${role}` }, h("div", { class: "bubble" }, body));
    messages.append(element);
    messages.scrollTop = messages.scrollHeight;
    return { element, body };
  };

  const submit = async () => {
    const text = input.value.trim();
    if (!text || running) return;
    input.value = "";
    bubble("user", text);
    const reply = bubble("assistant");
    reply.element.classList.add("streaming");
    const thinking = h("div", { class: "thinking", hidden: true });
    reply.body.before(thinking);
    reply.body.append(h("span", { class: "typing" }, h("i"), h("i"), h("i")));
    running = new AbortController();
    send.disabled = true;
    stop.hidden = false;
    let answer = "";
    try {
      for await (const part of api.chat(model, text, panel.sessionId, running.signal)) {
        if (part.session && part.session !== panel.sessionId) {
          panel.open(part.session);
          panel.poll();
          showSession();
          history.replaceState(null, "", `#/projects/${enc(projectId)}/agents/${enc(agentId)}/chat?session=${enc(part.session)}`);
        }
        if (part.reasoning) {
          thinking.hidden = false;
          thinking.textContent += part.reasoning;
        }
        if (part.content) {
          answer += part.content;
          fill(reply.body, answer);
          messages.scrollTop = messages.scrollHeight;
        }
      }
      if (!answer) fill(reply.body, h("span", { class: "muted" }, "(no answer)"));
    } catch (error) {
      reply.element.classList.add("message-error");
      fill(reply.body, running.signal.aborted ? "Stopped." : error.message);
    } finally {
      reply.element.classList.remove("streaming");
      running = null;
      // The agent's status settles just after the answer: look again soon, not in two seconds.
      lastPoll = Date.now() - POLL_IDLE_MS + 500;
      send.disabled = false;
      stop.hidden = true;
      await panel.poll();
      await noticeAsks();
      input.focus();
    }
  };

  const form = h(
    "form",
    {
      class: "composer",
      onsubmit: (event) => {
        event.preventDefault();
        submit();
      },
    },
    input,
    h("div", { class: "composer-actions" }, stop, send),
  );
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  stop.addEventListener("click", () => running?.abort());

  const page = h(
    "div",
    { class: "page chat-page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, agent.name, " ", status), h("p", { class: "muted" }, h("span", { class: "mono" }, model), " · ", sessionLabel)),
      h(
        "div",
        { class: "head-actions" },
        h(
          "button",
          {
            class: "button",
            dataset: { action: "new-session" },
            onclick: () => {
              if (running) return;
              panel.open(null);
              messages.replaceChildren();
              seenAsks = 0;
              showSession();
              history.replaceState(null, "", `#/projects/${enc(projectId)}/agents/${enc(agentId)}/chat`);
            },
          },
          "New session",
        ),
      ),
    ),
    h(
      "div",
      { class: "chat-layout" },
      h("section", { class: "card conversation" }, messages, form),
      h("section", { class: "card live-steps" }, panel.el),
    ),
  );

  showSession();
  if (sessionId) {
    await panel.poll();
    replay(panel.events, bubble);
    await noticeAsks();
  }
  // Fast while a chat runs, slowly otherwise (another client may be using the session too).
  every(POLL_RUNNING_MS, page, async () => {
    if (!running && Date.now() - lastPoll < POLL_IDLE_MS) return;
    lastPoll = Date.now();
    const [fresh] = await Promise.all([api.get(`/api/v1/projects/${enc(projectId)}/agents/${enc(agentId)}`), panel.poll()]);
    fill(status, badge(fresh.status));
    await noticeAsks();
  });
  return { el: page, title: agent.name, project, focus: input };
}

/** The conversation of an earlier session: each top-level run's message and answer. */
function replay(events, bubble) {
  for (const run of linkRuns(events)) {
    const asked = run.events.find((e) => e.event_type === "user_message");
    const answered = [...run.events].reverse().find((e) => e.event_type === "agent_response" || e.event_type === "error");
    if (asked) bubble("user", asked.content);
    if (answered) {
      const reply = bubble("assistant", answered.content);
      if (answered.event_type === "error") reply.element.classList.add("message-error");
    }
  }
}
