// The console's shell and router: a top bar, the projects in a side bar, and the page the
// location's hash names. Every page is built from the gateway's public REST and SSE APIs.

import { Api, enc } from "./api.js";
import { chatView } from "./chat.js";
import { fill, h } from "./dom.js";
import { requestsView } from "./requests.js";
import { usageView } from "./usage.js";
import { schedulesView } from "./schedules.js";
import { versionsView } from "./versions.js";
import { loginView, projectView, projectsView, sessionView } from "./views.js";

const root = document.getElementById("app");
const api = new Api(() => {
  location.hash = "#/login";
  route();
});
let generation = 0;
let user = null;

const ROUTES = [
  [/^#\/projects\/([^/]+)\/agents\/([^/]+)\/chat$/, (m, query) => chatView(api, m[1], m[2], query.get("session"))],
  [/^#\/projects\/([^/]+)\/agents\/([^/]+)\/versions$/, (m) => versionsView(api, m[1], m[2])],
  [/^#\/projects\/([^/]+)\/sessions\/([^/]+)$/, (m) => sessionView(api, m[1], m[2])],
  [/^#\/projects\/([^/]+)\/requests$/, (m) => requestsView(api, m[1])],
  [/^#\/projects\/([^/]+)\/usage$/, (m, query) => usageView(api, m[1], query)],
  [/^#\/projects\/([^/]+)\/schedules$/, (m) => schedulesView(api, m[1])],
  [/^#\/projects\/([^/]+)$/, (m) => projectView(api, m[1])],
  [/^(#\/?|#\/projects|)$/, () => projectsView(api)],
];

async function route() {
  const current = ++generation;
  const [path, search = ""] = location.hash.split("?");
  if (!api.signedIn) {
    user = null;
    fill(root, loginView(api, signedIn));
    document.title = "Sign in · agentmesh console";
    return;
  }
  if (path === "#/login") {
    location.hash = "#/projects";
    return;
  }
  const match = ROUTES.map(([pattern, view]) => [path.match(pattern), view]).find(([m]) => m);
  const main = h("main", { class: "main" }, h("div", { class: "loading" }, h("span", { class: "spinner" }), "Loading…"));
  const shell = await shellFor(main);
  if (current !== generation) return;
  fill(root, shell);
  let page;
  try {
    if (!match) throw new Error(`No page at ${path}.`);
    const [m, view] = match;
    const params = m.map((part) => (part === undefined ? part : decodeURIComponent(part)));
    page = await view(params, new URLSearchParams(search));
  } catch (error) {
    if (current !== generation || !api.signedIn) return;
    fill(main, h("div", { class: "page" }, h("div", { class: "alert", role: "alert" }, error.message), h("a", { class: "button", href: "#/projects" }, "Back to projects")));
    return;
  }
  if (current !== generation) return;
  const view = page instanceof Node ? { el: page } : page;
  fill(main, view.el);
  markProject(shell, view.project?.id);
  document.title = `${view.title ?? "Projects"} · agentmesh console`;
  view.focus?.focus();
}

async function shellFor(main) {
  user ??= await api.get("/api/v1/users/me").catch(() => null);
  const projects = await api.all("/api/v1/projects").catch(() => []);
  return h(
    "div",
    { class: "shell" },
    h(
      "header",
      { class: "topbar" },
      h("a", { class: "brand", href: "#/projects" }, h("img", { src: "console/favicon.svg", alt: "", width: 24, height: 24 }), "agentmesh", h("span", { class: "brand-sub" }, "console")),
      h("span", { class: "spacer" }),
      h("a", { class: "top-link", href: "docs", target: "_blank", rel: "noopener" }, "API docs"),
      user ? h("span", { class: "user", title: user.email }, h("span", { class: "avatar" }, (user.first_name || user.email)[0].toUpperCase()), user.email, user.is_superuser ? h("span", { class: "badge badge-superuser" }, "superuser") : null) : null,
      h(
        "button",
        {
          class: "button small ghost",
          dataset: { action: "sign-out" },
          onclick: async () => {
            await api.logout();
            location.hash = "#/login";
            route();
          },
        },
        "Sign out",
      ),
    ),
    h(
      "div",
      { class: "frame" },
      h(
        "aside",
        { class: "sidebar" },
        h("a", { class: "side-title", href: "#/projects" }, "Projects"),
        h(
          "ul",
          { class: "side-list" },
          projects.map((project) => h("li", {}, h("a", { href: `#/projects/${enc(project.id)}`, dataset: { project: project.id } }, project.name, h("span", { class: "mono muted" }, project.slug)))),
        ),
      ),
      main,
    ),
  );
}

/** After signing in: the page the location names (a link followed before signing in), else the projects. */
function signedIn() {
  const [path] = location.hash.split("?");
  if (path === "#/login" || path === "#/projects" || path === "") {
    if (location.hash !== "#/projects") location.hash = "#/projects";
    else route();
  } else route();
}

function markProject(shell, projectId) {
  for (const link of shell.querySelectorAll(".side-list a")) link.classList.toggle("active", link.dataset.project === projectId);
}

window.addEventListener("hashchange", route);
route();
