// An agent's versions (docs/sessions.md, Agent versions): every change of the agent or of its
// type made one, newest first, each with the fields that differ from the one before (the REST
// diff); a button rolls the agent back to an older one (a new version with its config), and one
// moves every session that has run the agent to its latest version.

import { enc } from "./api.js";
import { dateTime, fill, h, shortId } from "./dom.js";

/** A changed field as one line: `config.mock_responses: ["a"] → ["b"]`. */
function changeLine(change) {
  const show = (value) => (value === null || value === undefined ? "not set" : JSON.stringify(value));
  return h("li", { class: "mono" }, `${change.field}: ${show(change.before)} → ${show(change.after)}`);
}

export async function versionsView(api, projectId, agentId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const agentPath = `/api/v1/projects/${enc(projectId)}/agents/${enc(agentId)}`;
  const agent = await api.get(agentPath);
  const body = h("tbody");
  const notice = h("div", { class: "alert", hidden: true, role: "status" });

  // What an action did, or why it failed, in the notice above the table.
  const act = async (label, call) => {
    notice.hidden = true;
    let ok = true;
    try {
      fill(notice, await call());
    } catch (error) {
      ok = false;
      fill(notice, `${label}: ${error.message}`);
    }
    notice.classList.toggle("alert-ok", ok);
    notice.setAttribute("role", ok ? "status" : "alert");
    notice.hidden = false;
    await load();
  };
  const moveAll = () =>
    act("Moving the sessions", async () => {
      const moved = await api.post(`${agentPath}/sessions/move`, { version: "latest" });
      return `Moved ${moved.moved_sessions} of ${moved.sessions} sessions to version ${moved.version}.`;
    });
  const restore = (number) =>
    act(`Rolling back to version ${number}`, async () => {
      const restored = await api.post(`${agentPath}/versions/${number}/restore`);
      return `Rolled back to version ${number}'s config: now version ${restored.number}.`;
    });

  const load = async () => {
    const versions = await api.all(`${agentPath}/versions`);
    const latest = versions[0]?.number ?? 0;
    const diffs = await Promise.all(
      versions.map((version) => (version.number > 1 ? api.get(`${agentPath}/versions/${version.number}/diff`) : null)),
    );
    fill(
      body,
      versions.map((version, index) =>
        h(
          "tr",
          { dataset: { version: version.number } },
          h("td", {}, h("strong", {}, `v${version.number}`), version.number === latest ? " (latest)" : ""),
          h("td", { class: "muted" }, dateTime(version.created_at)),
          h("td", { class: "mono muted" }, version.created_by ? shortId(version.created_by) : "—"),
          h("td", {}, diffs[index] ? h("ul", { class: "changes" }, diffs[index].changes.map(changeLine)) : h("span", { class: "muted" }, "first version")),
          h(
            "td",
            {},
            version.number === latest
              ? null
              : h("button", { class: "button small", dataset: { action: "restore" }, title: "Make a new version with this version's config", onclick: () => restore(version.number) }, "Roll back to this"),
          ),
        ),
      ),
    );
  };

  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, `${agent.name}: versions`), h("p", { class: "muted" }, "Every change of the agent or its type makes a version; a session keeps the one it started on until moved.")),
      h(
        "div",
        { class: "head-actions" },
        h("button", { class: "button", dataset: { action: "move-all" }, title: "Move every session that has run the agent to its latest version", onclick: moveAll }, "Move all sessions to latest"),
      ),
    ),
    notice,
    h(
      "section",
      { class: "card" },
      h("table", { class: "table versions-table" }, h("thead", {}, h("tr", {}, ["Version", "Made", "By", "Changed from the one before", ""].map((name) => h("th", {}, name)))), body),
    ),
  );
  await load();
  return { el: page, title: `${agent.name} versions`, project };
}
