// Building the page: elements from plain values, never from HTML strings, so text that comes
// from agents and users is always shown as text.

/** An element: `h("div", {class: "x", onclick}, "text", child, [more])`. */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "style" && typeof value === "object") setStyle(element, value);
    else if (name in element && typeof value !== "string") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

// Through the CSSOM, which the page's Content-Security-Policy allows (style attributes it does not).
function setStyle(element, styles) {
  for (const [name, value] of Object.entries(styles)) {
    if (name.startsWith("--")) element.style.setProperty(name, value);
    else element.style[name] = value;
  }
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** Milliseconds since the epoch of an ISO time (microseconds trimmed: not every engine reads them). */
export function millis(iso) {
  if (!iso) return NaN;
  return Date.parse(String(iso).replace(/(\.\d{3})\d+/, "$1"));
}

export function duration(ms) {
  if (!Number.isFinite(ms)) return "?";
  if (ms <= 0) return "0 ms";
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(2)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function clock(iso) {
  const ms = millis(iso);
  return Number.isFinite(ms) ? new Date(ms).toLocaleTimeString([], { hour12: false }) : "";
}

export function dateTime(iso) {
  const ms = millis(iso);
  return Number.isFinite(ms) ? new Date(ms).toLocaleString([], { hour12: false }) : "—";
}

export function ago(iso) {
  const ms = millis(iso);
  if (!Number.isFinite(ms)) return "—";
  const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return dateTime(iso);
}

export function short(text, limit = 120) {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "—";
}

const PALETTE = ["#4f46e5", "#0d9488", "#ea580c", "#db2777", "#16a34a", "#0284c7", "#ca8a04", "#7c3aed"];

/** A stable colour per agent name (FNV-1a), the same in the steps, the waterfall and the tables. */
export function agentColor(name) {
  let hash = 2166136261;
  for (const char of String(name)) hash = Math.imul(hash ^ char.codePointAt(0), 16777619) >>> 0;
  return PALETTE[hash % PALETTE.length];
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${kind}` }, text);
}

/** A repeating task that stops itself once its element has left the page. */
export function every(ms, element, task) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    if (stopped) return;
    if (!element.isConnected) {
      stopped = true;
      return;
    }
    try {
      await task();
    } finally {
      if (!stopped) timer = setTimeout(tick, ms);
    }
  };
  timer = setTimeout(tick, ms);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
