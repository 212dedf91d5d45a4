// The gateway's public REST and SSE APIs, as the console uses them. Tokens live in
// sessionStorage: a closed tab signs out, a reload does not.

const TOKENS_KEY = "agentmesh.console.tokens";

/** A request the gateway refused: its HTTP status and the message it gave. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  /** `onSignedOut` runs when the tokens stop working (expired and not refreshable). */
  constructor(onSignedOut) {
    this.onSignedOut = onSignedOut;
    this.tokens = JSON.parse(sessionStorage.getItem(TOKENS_KEY) || "null");
    this.refreshing = null;
  }

  get signedIn() {
    return Boolean(this.tokens);
  }

  async login(email, password) {
    const tokens = await this.request("POST", "/api/v1/auth/login", { email, password }, { auth: false });
    this.keep(tokens);
  }

  async logout() {
    const refresh = this.tokens?.refresh_token;
    this.keep(null);
    if (refresh) {
      await this.request("POST", "/api/v1/auth/logout", { refresh_token: refresh }, { auth: false }).catch(() => {});
    }
  }

  keep(tokens) {
    this.tokens = tokens;
    if (tokens) sessionStorage.setItem(TOKENS_KEY, JSON.stringify(tokens));
    else sessionStorage.removeItem(TOKENS_KEY);
  }

  headers(extra = {}) {
    const headers = { accept: "application/json", ...extra };
    if (this.tokens) headers.authorization = `Bearer ${this.tokens.access_token}`;
    return headers;
  }

  /** One JSON request; a 401 refreshes the tokens once and tries again. */
  async request(method, path, body = undefined, { auth = true } = {}) {
    const send = () =>
      fetch(path, {
        method,
        headers: this.headers(body === undefined ? {} : { "content-type": "application/json" }),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    let response = await send();
    if (response.status === 401 && auth) {
      if (await this.refresh()) response = await send();
      if (response.status === 401) this.expired();
    }
    if (!response.ok) throw new ApiError(response.status, await errorMessage(response));
    return response.json();
  }

  get(path) {
    return this.request("GET", path);
  }

  post(path, body = {}) {
    return this.request("POST", path, body);
  }

  delete(path) {
    return this.request("DELETE", path);
  }

  /** New tokens from the refresh token; one refresh at a time however many requests ask. */
  refresh() {
    if (!this.tokens?.refresh_token) return Promise.resolve(false);
    this.refreshing ??= this.request("POST", "/api/v1/auth/refresh", { refresh_token: this.tokens.refresh_token }, { auth: false })
      .then((tokens) => {
        this.keep(tokens);
        return true;
      })
      .catch(() => false)
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }

  expired() {
    this.keep(null);
    this.onSignedOut();
  }

  /** Every item of a paged list (`{data, pagination}`). */
  async all(path) {
    const items = [];
    for (let page = 1; ; page += 1) {
      const separator = path.includes("?") ? "&" : "?";
      const body = await this.get(`${path}${separator}page=${page}&page_size=200`);
      items.push(...body.data);
      if (page >= (body.pagination?.total_pages ?? 1)) return items;
    }
  }

  /** Events of a session after `afterSeq`, every page; none while the session does not exist yet. */
  async events(projectId, sessionId, afterSeq) {
    const base = `/api/v1/projects/${enc(projectId)}/sessions/${enc(sessionId)}/events?page_size=1000&after_seq=${afterSeq}`;
    const events = [];
    let token = "";
    do {
      let body;
      try {
        body = await this.get(token ? `${base}&page_token=${enc(token)}` : base);
      } catch (error) {
        if (error.status === 404) return events;
        throw error;
      }
      events.push(...body.events);
      token = body.next_page_token;
    } while (token);
    return events;
  }

  /**
   * A streamed chat through the OpenAI-compatible endpoint. Yields `{session}` once the run has
   * started, then `{content}` / `{reasoning}` text deltas, then `{finish}`.
   */
  async *chat(model, message, sessionId, signal) {
    const open = () =>
      fetch("/v1/chat/completions", {
        method: "POST",
        signal,
        headers: this.headers({
          "content-type": "application/json",
          accept: "text/event-stream",
          ...(sessionId ? { "X-Session-Id": sessionId } : {}),
        }),
        body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: message }] }),
      });
    let response = await open();
    if (response.status === 401 && (await this.refresh())) response = await open();
    if (!response.ok) throw new ApiError(response.status, await errorMessage(response));
    yield { session: response.headers.get("X-Session-Id") };
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      const blocks = buffer.split(/\r?\n\r?\n/);
      buffer = blocks.pop();
      for (const block of blocks) {
        const data = block
          .split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trimStart())
          .join("\n");
        if (!data) continue;
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(0, chunk.error.message);
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        if (choice.delta?.reasoning_content) yield { reasoning: choice.delta.reasoning_content };
        if (choice.delta?.content) yield { content: choice.delta.content };
        if (choice.finish_reason) yield { finish: choice.finish_reason };
      }
    }
  }
}

export function enc(value) {
  return encodeURIComponent(value);
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body.error?.message) return body.error.message;
    if (typeof body.detail === "string") return body.detail;
    if (Array.isArray(body.detail)) return body.detail.map((item) => item.msg ?? JSON.stringify(item)).join("; ");
    return JSON.stringify(body);
  } catch {
    return `HTTP ${response.status}`;
  }
}
