package dev.agentmesh.sdk;

import dev.agentmesh.common.v1.RunEvent;
import dev.agentmesh.gateway.v1.ChatRequest;
import dev.agentmesh.gateway.v1.ChatResponse;
import dev.agentmesh.gateway.v1.GatewayServiceGrpc;
import dev.agentmesh.gateway.v1.StreamChatRequest;
import dev.agentmesh.gateway.v1.StreamChatResponse;
import dev.agentmesh.memory.v1.Event;
import dev.agentmesh.memory.v1.ListEventsRequest;
import dev.agentmesh.memory.v1.ListEventsResponse;
import dev.agentmesh.memory.v1.MemoryServiceGrpc;
import dev.agentmesh.memory.v1.WatchEventsRequest;
import dev.agentmesh.memory.v1.WatchEventsResponse;
import dev.agentmesh.registry.v1.LoginRequest;
import dev.agentmesh.registry.v1.RegistryServiceGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.Context;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * A client of an agentmesh gateway over gRPC. Sign in with {@link #signIn} (or give a token to
 * {@link #withToken}); the access token is kept and sent as {@code authorization: Bearer} on
 * every call. The generated blocking stubs ({@link #gateway()}, {@link #memory()},
 * {@link #registry()}) reach everything else. Every failure is an {@link AgentMeshException}.
 * Thread-safe; close it to release the channel.
 */
public final class AgentMesh implements AutoCloseable {
  /** The contract version this SDK follows. */
  public static final String VERSION = "0.3.0";

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel channel;
  private final GatewayServiceGrpc.GatewayServiceBlockingStub gateway;
  private final MemoryServiceGrpc.MemoryServiceBlockingStub memory;
  private final RegistryServiceGrpc.RegistryServiceBlockingStub registry;
  private volatile String token;

  private AgentMesh(ManagedChannel channel, String token) {
    this.channel = channel;
    this.token = token;
    Channel authorized = io.grpc.ClientInterceptors.intercept(channel, new Authorize());
    this.gateway = GatewayServiceGrpc.newBlockingStub(authorized);
    this.memory = MemoryServiceGrpc.newBlockingStub(authorized);
    this.registry = RegistryServiceGrpc.newBlockingStub(authorized);
  }

  /** A client of the gateway at {@code address} ("host:port", plaintext) that sends {@code token}. */
  public static AgentMesh withToken(String address, String token) {
    return new AgentMesh(plaintext(address), token);
  }

  /** A client of the gateway on {@code channel} (e.g. one with TLS credentials) sending {@code token}. */
  public static AgentMesh withChannel(ManagedChannel channel, String token) {
    return new AgentMesh(channel, token);
  }

  /** Connects to the gateway at {@code address} ("host:port", plaintext) and signs in. */
  public static AgentMesh signIn(String address, String email, String password) {
    AgentMesh mesh = new AgentMesh(plaintext(address), "");
    try {
      mesh.signIn(email, password);
      return mesh;
    } catch (RuntimeException error) {
      mesh.close();
      throw error;
    }
  }

  private static ManagedChannel plaintext(String address) {
    return Grpc.newChannelBuilder(address, InsecureChannelCredentials.create()).build();
  }

  /** Signs in with e-mail and password (the registry's Login, through the gateway); keeps the token. */
  public void signIn(String email, String password) {
    LoginRequest request = LoginRequest.newBuilder().setEmail(email).setPassword(password).build();
    token = call(() -> registry.login(request)).getTokens().getAccessToken();
  }

  /** The access token sent with every call. */
  public String token() {
    return token;
  }

  /**
   * Sends {@code message} to {@code agent} ("{project}/{agent}") and streams every step of the run.
   * Delegated agents' events (their {@code run_completed} too) arrive mid-stream with a non-empty
   * {@code delegation_path}; the stream ends with the addressed agent's {@code run_completed} or
   * {@code run_failed}. {@code sessionId} may be empty for a new session.
   */
  public EventStream<RunEvent> streamChat(String agent, String message, String sessionId) {
    StreamChatRequest request =
        StreamChatRequest.newBuilder().setAgent(agent).setMessage(message).setSessionId(sessionId).build();
    return stream(() -> gateway.streamChat(request), StreamChatResponse::getEvent);
  }

  /** As {@link #streamChat(String, String, String)} in a new session. */
  public EventStream<RunEvent> streamChat(String agent, String message) {
    return streamChat(agent, message, "");
  }

  /** Sends {@code message} to {@code agent} and returns its answer. */
  public ChatResponse chat(String agent, String message, String sessionId) {
    ChatRequest request =
        ChatRequest.newBuilder().setAgent(agent).setMessage(message).setSessionId(sessionId).build();
    return call(() -> gateway.chat(request));
  }

  /** As {@link #chat(String, String, String)} in a new session. */
  public ChatResponse chat(String agent, String message) {
    return chat(agent, message, "");
  }

  /** One page of a session's events after {@code afterSeq} (0: from the start). */
  public EventPage listEvents(String sessionId, int pageSize, String pageToken, long afterSeq) {
    ListEventsRequest request =
        ListEventsRequest.newBuilder()
            .setSessionId(sessionId)
            .setPageSize(pageSize)
            .setPageToken(pageToken)
            .setAfterSeq(afterSeq)
            .build();
    ListEventsResponse response = call(() -> memory.listEvents(request));
    return new EventPage(response.getEventsList(), response.getNextPageToken());
  }

  /** Every event of a session, page after page. */
  public List<Event> allEvents(String sessionId, int pageSize) {
    List<Event> events = new ArrayList<>();
    String pageToken = "";
    do {
      EventPage page = listEvents(sessionId, pageSize, pageToken, 0);
      events.addAll(page.events());
      pageToken = page.nextPageToken();
    } while (!pageToken.isEmpty());
    return events;
  }

  /** A session's events after {@code afterSeq}, then live ones, until the stream is closed. */
  public EventStream<Event> followSession(String sessionId, long afterSeq) {
    WatchEventsRequest request =
        WatchEventsRequest.newBuilder().setSessionId(sessionId).setAfterSeq(afterSeq).build();
    return stream(() -> memory.watchEvents(request), WatchEventsResponse::getEvent);
  }

  /** The generated gateway stub (Chat, StreamChat), with the token attached. */
  public GatewayServiceGrpc.GatewayServiceBlockingStub gateway() {
    return gateway;
  }

  /** The generated memory stub (sessions and events), with the token attached. */
  public MemoryServiceGrpc.MemoryServiceBlockingStub memory() {
    return memory;
  }

  /** The generated registry stub (projects, agent types, agents), with the token attached. */
  public RegistryServiceGrpc.RegistryServiceBlockingStub registry() {
    return registry;
  }

  /** Closes the channel, waiting up to five seconds for calls in flight. */
  @Override
  public void close() {
    channel.shutdown();
    try {
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException interrupted) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  private static <T> T call(Supplier<T> rpc) {
    try {
      return rpc.get();
    } catch (StatusRuntimeException error) {
      throw AgentMeshException.from(error);
    }
  }

  /** Opens a server stream in a context of its own, so that closing it cancels just that call. */
  private static <M, T> EventStream<T> stream(Supplier<Iterator<M>> open, Function<M, T> unwrap) {
    Context.CancellableContext context = Context.current().withCancellation();
    Context previous = context.attach();
    try {
      return new EventStream<>(context, open.get(), unwrap);
    } catch (RuntimeException error) {
      context.cancel(error);
      throw AgentMeshException.from(error);
    } finally {
      context.detach(previous);
    }
  }

  /** Adds {@code authorization: Bearer <token>} to every call while a token is kept. */
  private final class Authorize implements ClientInterceptor {
    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          String current = token;
          if (current != null && !current.isEmpty()) {
            headers.put(AUTHORIZATION, "Bearer " + current);
          }
          super.start(listener, headers);
        }
      };
    }
  }
}
