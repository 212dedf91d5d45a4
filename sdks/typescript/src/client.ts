import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { RunEvent } from "./gen/agentmesh/common/v1/run_pb.js";
import { GatewayService, type ChatResponse } from "./gen/agentmesh/gateway/v1/gateway_service_pb.js";
import { MemoryService } from "./gen/agentmesh/memory/v1/memory_service_pb.js";
import type { Event, EventType } from "./gen/agentmesh/memory/v1/resources_pb.js";
import { RegistryService } from "./gen/agentmesh/registry/v1/registry_service_pb.js";
import { AgentMeshError } from "./errors.js";

/** Where the mesh's gateway listens and how to authenticate. */
export interface ConnectOptions {
  /** The gateway's gRPC address: "host:port" (plaintext) or a URL ("https://mesh.example:443"). */
  address: string;
  /** An access token; leave it out and call signIn() instead. */
  token?: string;
}

/** One page of a session's events. */
export interface EventPage {
  events: Event[];
  /** Token for the next page; empty on the last. */
  nextPageToken: string;
}

/** Filters and paging for listEvents(). */
export interface ListEventsOptions {
  /** At most this many per page (the service defaults to 100, caps at 1000). */
  pageSize?: number;
  /** Continue from a previous page's nextPageToken. */
  pageToken?: string;
  /** Only events after this seq. */
  afterSeq?: bigint;
  /** Only these event types. */
  eventTypes?: EventType[];
  /** Only this run's events. */
  runId?: string;
}

function baseUrl(address: string): string {
  return /^[a-z]+:\/\//i.test(address) ? address : `http://${address}`;
}

/**
 * A client for an agentmesh gateway over gRPC.
 *
 * Every call sends the token it holds as `authorization: Bearer <token>`; every failure is thrown
 * as an {@link AgentMeshError} carrying the gRPC code and the error's reason.
 */
export class AgentMesh {
  /** The access token sent with every call; set by signIn() or the constructor. */
  token: string | undefined;
  readonly gateway: Client<typeof GatewayService>;
  readonly memory: Client<typeof MemoryService>;
  readonly registry: Client<typeof RegistryService>;

  constructor(options: ConnectOptions) {
    this.token = options.token;
    const authorize: Interceptor = (next) => (request) => {
      if (this.token) {
        request.header.set("authorization", `Bearer ${this.token}`);
      }
      return next(request);
    };
    const transport = createGrpcTransport({ baseUrl: baseUrl(options.address), interceptors: [authorize] });
    this.gateway = createClient(GatewayService, transport);
    this.memory = createClient(MemoryService, transport);
    this.registry = createClient(RegistryService, transport);
  }

  /** Connects and signs in with e-mail and password (the registry's Login, through the gateway). */
  static async signIn(address: string, email: string, password: string): Promise<AgentMesh> {
    const mesh = new AgentMesh({ address });
    await mesh.signIn(email, password);
    return mesh;
  }

  /** Exchanges e-mail and password for an access token and keeps it for later calls. */
  async signIn(email: string, password: string): Promise<void> {
    const response = await call(() => this.registry.login({ email, password }));
    this.token = response.tokens?.accessToken;
  }

  /**
   * Streams a chat with `agent` ("project/agent"): every step of the run as a typed event, switch
   * on `event.kind.case`. Events of delegated agents arrive mid-stream with a non-empty
   * `delegationPath` (their own `runCompleted` included); the stream ends with the addressed
   * agent's `runCompleted` or `runFailed`. Pass `sessionId` to continue a session.
   */
  async *streamChat(agent: string, message: string, sessionId = ""): AsyncGenerator<RunEvent> {
    try {
      for await (const response of this.gateway.streamChat({ agent, message, sessionId })) {
        if (response.event) {
          yield response.event;
        }
      }
    } catch (error) {
      throw AgentMeshError.from(error);
    }
  }

  /** Chats with `agent` and returns the final answer (with its session and run ids and usage). */
  chat(agent: string, message: string, sessionId = ""): Promise<ChatResponse> {
    return call(() => this.gateway.chat({ agent, message, sessionId }));
  }

  /** One page of a session's events, in seq order. */
  async listEvents(sessionId: string, options: ListEventsOptions = {}): Promise<EventPage> {
    const response = await call(() => this.memory.listEvents({ sessionId, ...options }));
    return { events: response.events, nextPageToken: response.nextPageToken };
  }

  /** Every event of a session, fetching page after page as the iteration goes. */
  async *allEvents(sessionId: string, options: Omit<ListEventsOptions, "pageToken"> = {}): AsyncGenerator<Event> {
    let pageToken = "";
    do {
      const page = await this.listEvents(sessionId, { ...options, pageToken });
      yield* page.events;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Follows a session live: its events after `afterSeq` (0: from the oldest kept), then each new
   * one as it is recorded, until the caller stops iterating or `signal` aborts.
   */
  async *followSession(sessionId: string, afterSeq = 0n, signal?: AbortSignal): AsyncGenerator<Event> {
    try {
      for await (const response of this.memory.watchEvents({ sessionId, afterSeq }, { signal })) {
        if (response.event) {
          yield response.event;
        }
      }
    } catch (error) {
      throw AgentMeshError.from(error);
    }
  }
}

async function call<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw AgentMeshError.from(error);
  }
}
