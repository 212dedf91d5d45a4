// The console's pages other than chat: sign-in, projects, one project (its agents with their
// live status and lifecycle buttons, and its sessions), and one session.

import { enc } from "./api.js";
import { ago, agentColor, badge, dateTime, every, fill, h, shortId } from "./dom.js";
import { pendingRequests } from "./requests.js";
import { SessionPanel } from "./session.js";

const AGENT_REFRESH_MS = 2000;
const SESSION_REFRESH_MS = 5000;
const LIVE_SESSION_MS = 1500;

export function loginView(api, onSignedIn) {
  const error = h("div", { class: "alert", hidden: true, role: "alert" });
  const email = h("input", { type: "email", name: "email", id: "email", autocomplete: "username", required: true, autofocus: true });
  const password = h("input", { type: "password", name: "password", id: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "button primary wide" }, "Sign in");
  const form = h(
    "form",
    {
      class: "login-card",
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        error.hidden = true;
        try {
          await api.login(email.value, password.value);
          onSignedIn();
        } catch (failure) {
          fill(error, failure.status === 401 ? "Wrong e-mail or password." : failure.message).hidden = false;
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("div", { class: "login-brand" }, h("img", { src: "console/favicon.svg", alt: "", width: 40, height: 40 }), h("h1", {}, "agentmesh")),
    h("p", { class: "muted" }, "Sign in to the console with your agentmesh account."),
    error,
    h("label", { for: "email" }, "E-mail"),
    email,
    h("label", { for: "password" }, "Password"),
    password,
    submit,
  );
  return h("div", { class: "login-page" }, form);
}

export async function projectsView(api) {
  const projects = await api.all("/api/v1/projects");
  return h(
    "div",
    { class: "page" },
    h("header", { class: "page-head" }, h("div", {}, h("h1", {}, "Projects"), h("p", { class: "muted" }, "The projects you own, or all of them as a superuser."))),
    projects.length
      ? h(
          "div",
          { class: "cards" },
          projects.map((project) =>
            h(
              "a",
              { class: "card project-card", href: `#/projects/${enc(project.id)}`, dataset: { slug: project.slug } },
              h("h2", {}, project.name),
              h("span", { class: "mono muted" }, project.slug),
              h("p", {}, project.description || h("span", { class: "muted" }, "No description.")),
              h("span", { class: "muted small" }, `created ${dateTime(project.created_at)}`),
            ),
          ),
        )
      : h("div", { class: "card empty" }, "No projects yet. Declare some with ", h("code", {}, "agentmesh apply -f FILE.yaml"), "."),
  );
}

export async function projectView(api, projectId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const agentsBody = h("tbody");
  const sessionsBody = h("tbody");
  const notice = h("div", { class: "alert", hidden: true, role: "alert" });
  const waiting = h("span", { class: "count" });
  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, project.name), h("p", { class: "muted" }, h("span", { class: "mono" }, project.slug), project.description ? ` · ${project.description}` : "")),
      h(
        "div",
        { class: "head-actions" },
        h("a", { class: "button", href: `#/projects/${enc(projectId)}/usage`, dataset: { action: "usage" } }, "Usage"),
        h("a", { class: "button", href: `#/projects/${enc(projectId)}/schedules`, dataset: { action: "schedules" } }, "Schedules"),
        h("a", { class: "button", href: `#/projects/${enc(projectId)}/requests`, dataset: { action: "requests" } }, "Requests", waiting),
      ),
    ),
    notice,
    h(
      "section",
      { class: "card" },
      h("div", { class: "card-head" }, h("h2", {}, "Agents"), h("span", { class: "live" }, h("span", { class: "live-dot" }), "live")),
      h(
        "table",
        { class: "table agents-table" },
        h("thead", {}, h("tr", {}, ["Agent", "Status", "Type", "Model", "Tasks", "Tokens", "Last active", ""].map((name) => h("th", {}, name)))),
        agentsBody,
      ),
    ),
    h(
      "section",
      { class: "card" },
      h("div", { class: "card-head" }, h("h2", {}, "Sessions")),
      h(
        "table",
        { class: "table sessions-table" },
        h("thead", {}, h("tr", {}, ["Session", "Started with", "Events", "Started", "Last activity"].map((name) => h("th", {}, name)))),
        sessionsBody,
      ),
    ),
  );

  const act = async (label, call) => {
    notice.hidden = true;
    try {
      await call();
    } catch (error) {
      fill(notice, `${label}: ${error.message}`).hidden = false;
    }
    shown = null;
    await loadAgents();
  };
  const agentPath = (agent) => `/api/v1/projects/${enc(projectId)}/agents/${enc(agent.id)}`;

  // Rows are rebuilt only when an agent changed, so a button armed to confirm stays armed.
  let shown = null;
  const loadAgents = async () => {
    const agents = await api.all(`/api/v1/projects/${enc(projectId)}/agents`);
    const key = JSON.stringify(agents);
    if (key === shown) return;
    shown = key;
    fill(
      agentsBody,
      agents.length ? agents.map((agent) => agentRow(agent)) : h("tr", {}, h("td", { colspan: 8, class: "empty" }, "No agents in this project.")),
    );
  };
  const agentRow = (agent) => {
    const terminated = agent.status === "terminated";
    const paused = agent.status === "paused";
    const actions = h("div", { class: "actions" });
    if (!terminated) {
      actions.append(
        h("a", { class: "button small primary", href: `#/projects/${enc(projectId)}/agents/${enc(agent.id)}/chat`, dataset: { action: "chat" } }, "Chat"),
        paused
          ? h("button", { class: "button small", dataset: { action: "resume" }, onclick: () => act(`Resuming ${agent.name}`, () => api.post(`${agentPath(agent)}/resume`)) }, "Resume")
          : h("button", { class: "button small", dataset: { action: "pause" }, onclick: () => act(`Pausing ${agent.name}`, () => api.post(`${agentPath(agent)}/pause`)) }, "Pause"),
        confirmButton("Terminate", `Terminate ${agent.name}?`, () => act(`Terminating ${agent.name}`, () => api.delete(agentPath(agent)))),
      );
    }
    actions.append(h("a", { class: "button small ghost", href: `#/projects/${enc(projectId)}/agents/${enc(agent.id)}/versions`, dataset: { action: "versions" } }, "Versions"));
    return h(
      "tr",
      { dataset: { agent: agent.name, status: agent.status } },
      h(
        "td",
        {},
        h("span", { class: "agent-dot", style: { "--agent": agentColor(agent.name) } }),
        h("strong", {}, agent.name),
        agent.public && h("span", { class: "badge badge-public", title: "Its A2A agent card is served without a credential", dataset: { public: "" } }, "public"),
      ),
      h("td", {}, badge(agent.status)),
      h("td", {}, types.get(agent.agent_type_id)?.name ?? h("span", { class: "mono muted" }, shortId(agent.agent_type_id))),
      h("td", { class: "mono muted" }, agent.config?.primary_model ?? types.get(agent.agent_type_id)?.primary_model ?? "—"),
      h("td", {}, agent.tasks_completed),
      h("td", {}, agent.tokens_used),
      h("td", { class: "muted" }, dateTime(agent.last_activity_at ?? agent.created_at)),
      h("td", {}, actions),
    );
  };

  const loadSessions = async () => {
    const body = await api.get(`/api/v1/projects/${enc(projectId)}/sessions?page_size=50`);
    fill(
      sessionsBody,
      body.data.length
        ? body.data.map((session) =>
            h(
              "tr",
              { class: "link-row", dataset: { session: session.id }, onclick: () => (location.hash = `#/projects/${enc(projectId)}/sessions/${enc(session.id)}`) },
              h("td", { class: "mono" }, h("a", { href: `#/projects/${enc(projectId)}/sessions/${enc(session.id)}` }, session.id)),
              h("td", {}, session.agent),
              h("td", {}, session.last_seq),
              h("td", { class: "muted" }, dateTime(session.created_at)),
              h("td", { class: "muted" }, ago(session.updated_at)),
            ),
          )
        : h("tr", {}, h("td", { colspan: 5, class: "empty" }, "No sessions yet: chat with an agent to start one.")),
    );
  };

  // How many requests for a person's input wait: the Requests page answers them.
  const loadWaiting = async () => {
    const pending = await pendingRequests(api, projectId);
    fill(waiting, pending.length ? String(pending.length) : "");
    waiting.classList.toggle("count-waiting", pending.length > 0);
  };

  const types = new Map((await api.all("/api/v1/agent-types")).map((type) => [type.id, type]));
  await Promise.all([loadAgents(), loadSessions(), loadWaiting()]);
  every(AGENT_REFRESH_MS, page, loadAgents);
  every(AGENT_REFRESH_MS, page, loadWaiting);
  every(SESSION_REFRESH_MS, page, loadSessions);
  return { el: page, title: project.name, project };
}

export async function sessionView(api, projectId, sessionId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  // A fork sees the history up to the chosen event and goes its own way; the console opens it.
  const fork = async (event) => {
    try {
      const forked = await api.post(`/api/v1/projects/${enc(projectId)}/sessions/${enc(sessionId)}/fork`, { at_seq: event.seq });
      location.hash = `#/projects/${enc(projectId)}/sessions/${enc(forked.id)}`;
    } catch (error) {
      panel.fail(`Could not fork the session: ${error.message}`);
    }
  };
  const panel = new SessionPanel(api, projectId, sessionId, { onFork: fork });
  await panel.poll();
  const first = panel.events[0];
  const agents = first ? await api.all(`/api/v1/projects/${enc(projectId)}/agents`) : [];
  const starter = agents.find((agent) => agent.name === first?.agent);
  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, "Session ", h("span", { class: "mono" }, sessionId)), h("p", { class: "muted" }, first ? `begun with ${first.agent} · ${dateTime(first.created_at)}` : "no events")),
      starter && starter.status !== "terminated"
        ? h("a", { class: "button primary", href: `#/projects/${enc(projectId)}/agents/${enc(starter.id)}/chat?session=${enc(sessionId)}` }, "Continue in chat")
        : null,
    ),
    h("section", { class: "card" }, panel.el),
  );
  every(LIVE_SESSION_MS, page, () => panel.poll());
  return { el: page, title: `session ${shortId(sessionId)}`, project };
}

/** A button that asks once more, in place, before it acts. */
function confirmButton(label, question, action) {
  const button = h("button", { class: "button small danger", dataset: { action: label.toLowerCase() } }, label);
  let armed = null;
  button.addEventListener("click", () => {
    if (armed) {
      clearTimeout(armed);
      armed = null;
      action();
      return;
    }
    button.textContent = "Confirm";
    button.title = question;
    button.classList.add("armed");
    armed = setTimeout(() => {
      armed = null;
      button.textContent = label;
      button.classList.remove("armed");
    }, 4000);
  });
  return button;
}
