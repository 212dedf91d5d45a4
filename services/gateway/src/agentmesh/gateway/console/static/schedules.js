// The Schedules page: a project's schedules (an agent run on a cron expression) with when each
// fires next, and each one's latest firings and how they came out, from the REST routes
// `…/schedules[/{id}/firings]`. Read-only: schedules are made with the CLI, REST or apply.

import { enc } from "./api.js";
import { badge, dateTime, h } from "./dom.js";

const LATEST_FIRINGS = 5;

export async function schedulesView(api, projectId) {
  const project = await api.get(`/api/v1/projects/${enc(projectId)}`);
  const base = `/api/v1/projects/${enc(projectId)}/schedules`;
  const schedules = await api.all(base);
  const firings = await Promise.all(schedules.map((s) => api.get(`${base}/${enc(s.id)}/firings?page_size=${LATEST_FIRINGS}`).then((body) => body.data)));
  const rows = schedules.map((schedule, index) =>
    h(
      "tr",
      { dataset: { schedule: schedule.id } },
      h("td", {}, h("strong", {}, schedule.name), h("div", { class: "muted" }, schedule.agent)),
      h("td", { class: "mono" }, schedule.cron, h("div", { class: "muted" }, schedule.time_zone)),
      h("td", {}, schedule.enabled ? dateTime(schedule.next_fire_at) : badge("disabled", "muted")),
      h("td", {}, `${schedule.session_policy} · ${schedule.overlap_policy} · missed: ${schedule.missed_policy}`),
      h("td", {}, firings[index].length ? firings[index].map((f) => h("div", { title: f.error || f.run_id }, badge(f.outcome), " ", dateTime(f.due_at))) : h("span", { class: "muted" }, "not fired yet")),
    ),
  );
  const page = h(
    "div",
    { class: "page" },
    h(
      "header",
      { class: "page-head" },
      h("div", {}, h("h1", {}, "Schedules"), h("p", { class: "muted" }, `Agents of ${project.name} run on a cron expression, with nobody waiting.`)),
      h("div", { class: "head-actions" }, h("a", { class: "button", href: `#/projects/${enc(projectId)}` }, "Back to the project")),
    ),
    h(
      "section",
      { class: "card" },
      schedules.length
        ? h("table", { class: "table" }, h("thead", {}, h("tr", {}, ["Schedule", "Cron", "Next", "Policies", "Latest firings"].map((name) => h("th", {}, name)))), h("tbody", {}, rows))
        : h("p", { class: "empty" }, "No schedules: create one with `agentmesh schedules create` or the REST API."),
    ),
  );
  return { el: page, title: `Schedules · ${project.name}`, project };
}
