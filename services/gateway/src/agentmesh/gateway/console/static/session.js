// One session, live: its steps, trace waterfall and event log, read from the REST API's
// session events (`after_seq`, so each poll fetches only what is new).

import { h, fill } from "./dom.js";
import { renderEventLog } from "./eventlog.js";
import { renderSteps } from "./steps.js";
import { renderWaterfall } from "./waterfall.js";

const TABS = [
  ["steps", "Steps"],
  ["waterfall", "Waterfall"],
  ["events", "Event log"],
];

export class SessionPanel {
  /**
   * `compact`: a narrow panel (beside a chat), with fewer columns in the event log; `onFork`:
   * what forking the session at an event of the log does (no fork button without it).
   */
  constructor(api, projectId, sessionId = null, { compact = false, onFork = null } = {}) {
    this.api = api;
    this.compact = compact;
    this.onFork = onFork;
    this.projectId = projectId;
    this.tab = "steps";
    this.opened = new Set();
    this.tabs = h(
      "nav",
      { class: "tabs", role: "tablist" },
      TABS.map(([name, label]) =>
        h("button", { class: "tab", role: "tab", dataset: { tab: name }, onclick: () => this.show(name) }, label, h("span", { class: "count" })),
      ),
    );
    this.body = h("div", { class: "panel-body" });
    this.error = h("div", { class: "alert", hidden: true });
    this.el = h("div", { class: "session-panel" }, this.tabs, this.error, this.body);
    this.open(sessionId);
  }

  /** Shows another session (or none yet). */
  open(sessionId) {
    this.sessionId = sessionId;
    this.events = [];
    this.lastSeq = 0;
    this.render();
  }

  /** Shows why something failed above the panel's body. */
  fail(message) {
    fill(this.error, message).hidden = false;
  }

  show(tab) {
    this.tab = tab;
    this.render();
  }

  /** Fetches the events after the last one seen; true when there were new ones. */
  async poll() {
    if (!this.sessionId) return false;
    const sessionId = this.sessionId;
    try {
      const events = await this.api.events(this.projectId, sessionId, this.lastSeq);
      this.error.hidden = true;
      if (sessionId !== this.sessionId || !events.length) return false;
      this.events.push(...events.filter((e) => e.seq > this.lastSeq));
      this.lastSeq = this.events[this.events.length - 1].seq;
      this.render();
      return true;
    } catch (error) {
      fill(this.error, `Could not read the session's events: ${error.message}`).hidden = false;
      return false;
    }
  }

  render() {
    for (const button of this.tabs.children) {
      const selected = button.dataset.tab === this.tab;
      button.classList.toggle("active", selected);
      button.setAttribute("aria-selected", String(selected));
    }
    this.tabs.querySelector('[data-tab="events"] .count').textContent = this.events.length ? String(this.events.length) : "";
    const view = {
      steps: () => renderSteps(this.events),
      waterfall: () => renderWaterfall(this.events),
      events: () => renderEventLog(this.events, this.opened, { compact: this.compact, onFork: this.onFork }),
    }[this.tab];
    fill(this.body, this.sessionId ? view() : h("p", { class: "empty" }, "Send a message to start a session."));
    this.body.dataset.lastSeq = String(this.lastSeq);
  }
}
