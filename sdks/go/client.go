// Package agentmesh is a client for an agentmesh gateway over gRPC: sign in, stream chats with
// agents as typed events, read a session's events page by page and follow a session live.
//
// The generated clients and messages live under gen/ (commonv1, gatewayv1, memoryv1,
// registryv1); Client exposes them for everything this package does not wrap.
package agentmesh

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"

	commonv1 "github.com/agentmesh/agentmesh/sdks/go/gen/agentmesh/common/v1"
	gatewayv1 "github.com/agentmesh/agentmesh/sdks/go/gen/agentmesh/gateway/v1"
	memoryv1 "github.com/agentmesh/agentmesh/sdks/go/gen/agentmesh/memory/v1"
	registryv1 "github.com/agentmesh/agentmesh/sdks/go/gen/agentmesh/registry/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Version is the SDK's version, which follows the contract's.
const Version = "0.3.0"

// Client talks to one gateway. It keeps the access token (from SignIn or WithToken) and sends
// it as "authorization: Bearer <token>" with every call. Safe for concurrent use.
type Client struct {
	Gateway  gatewayv1.GatewayServiceClient
	Memory   memoryv1.MemoryServiceClient
	Registry registryv1.RegistryServiceClient

	conn  *grpc.ClientConn
	mu    sync.RWMutex
	token string
}

// Option configures New.
type Option func(*options)

type options struct {
	token string
	creds credentials.TransportCredentials
}

// WithToken uses an access token instead of signing in.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTransportCredentials sets TLS (the default is plaintext, as `agentmesh up` serves).
func WithTransportCredentials(creds credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = creds }
}

// New connects to the gateway at address ("host:port"); the connection is made lazily.
func New(address string, opts ...Option) (*Client, error) {
	o := options{creds: insecure.NewCredentials()}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{token: o.token}
	conn, err := grpc.NewClient(address,
		grpc.WithTransportCredentials(o.creds),
		grpc.WithUnaryInterceptor(c.authorizeUnary),
		grpc.WithStreamInterceptor(c.authorizeStream),
	)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	c.Gateway = gatewayv1.NewGatewayServiceClient(conn)
	c.Memory = memoryv1.NewMemoryServiceClient(conn)
	c.Registry = registryv1.NewRegistryServiceClient(conn)
	return c, nil
}

// SignIn connects to the gateway at address and signs in with e-mail and password.
func SignIn(ctx context.Context, address, email, password string, opts ...Option) (*Client, error) {
	c, err := New(address, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.SignIn(ctx, email, password); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// SignIn exchanges e-mail and password for an access token (the registry's Login, through the
// gateway) and keeps it for later calls.
func (c *Client) SignIn(ctx context.Context, email, password string) error {
	response, err := c.Registry.Login(ctx, &registryv1.LoginRequest{Email: email, Password: password})
	if err != nil {
		return asError(err)
	}
	c.mu.Lock()
	c.token = response.GetTokens().GetAccessToken()
	c.mu.Unlock()
	return nil
}

// Token is the access token the client sends.
func (c *Client) Token() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.token
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) withToken(ctx context.Context) context.Context {
	if token := c.Token(); token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

func (c *Client) authorizeUnary(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(c.withToken(ctx), method, req, reply, cc, opts...)
}

func (c *Client) authorizeStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
	method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(c.withToken(ctx), desc, cc, method, opts...)
}

// StreamChat chats with agent ("project/agent") and yields every step of the run as a typed
// event (switch on event.GetKind()). Delegated agents' events, their RunCompleted included,
// arrive mid-stream with a non-empty DelegationPath; the stream ends with the addressed agent's
// RunCompleted or RunFailed. An empty sessionID starts a new session. A failure is yielded once,
// as an *Error, and ends the iteration; breaking out of the loop cancels the call.
func (c *Client) StreamChat(ctx context.Context, agent, message, sessionID string) iter.Seq2[*commonv1.RunEvent, error] {
	request := &gatewayv1.StreamChatRequest{Agent: agent, Message: message, SessionId: sessionID}
	return receiveAll(ctx, func(ctx context.Context) (receiver[*gatewayv1.StreamChatResponse], error) {
		return c.Gateway.StreamChat(ctx, request)
	}, (*gatewayv1.StreamChatResponse).GetEvent)
}

// Chat chats with agent and returns the final answer with its session and run ids and usage.
func (c *Client) Chat(ctx context.Context, agent, message, sessionID string) (*gatewayv1.ChatResponse, error) {
	response, err := c.Gateway.Chat(ctx, &gatewayv1.ChatRequest{Agent: agent, Message: message, SessionId: sessionID})
	return response, asError(err)
}

// ListEventsOptions pages and filters ListEvents.
type ListEventsOptions struct {
	// PageSize is at most this many per page (the service defaults to 100, caps at 1000).
	PageSize int32
	// PageToken continues from a previous page's NextPageToken.
	PageToken string
	// AfterSeq keeps only events after this seq.
	AfterSeq int64
}

// EventPage is one page of a session's events.
type EventPage struct {
	Events []*memoryv1.Event
	// NextPageToken fetches the next page; empty on the last.
	NextPageToken string
}

// ListEvents returns one page of a session's events, in seq order.
func (c *Client) ListEvents(ctx context.Context, sessionID string, opts ListEventsOptions) (*EventPage, error) {
	response, err := c.Memory.ListEvents(ctx, &memoryv1.ListEventsRequest{
		SessionId: sessionID, PageSize: opts.PageSize, PageToken: opts.PageToken, AfterSeq: opts.AfterSeq,
	})
	if err != nil {
		return nil, asError(err)
	}
	return &EventPage{Events: response.GetEvents(), NextPageToken: response.GetNextPageToken()}, nil
}

// AllEvents yields every event of a session, fetching pageSize events at a time.
func (c *Client) AllEvents(ctx context.Context, sessionID string, pageSize int32) iter.Seq2[*memoryv1.Event, error] {
	return func(yield func(*memoryv1.Event, error) bool) {
		opts := ListEventsOptions{PageSize: pageSize}
		for {
			page, err := c.ListEvents(ctx, sessionID, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, event := range page.Events {
				if !yield(event, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			opts.PageToken = page.NextPageToken
		}
	}
}

// FollowSession yields a session's events after afterSeq (0: from the oldest kept), then each
// new one as it is recorded, until the loop breaks or ctx ends.
func (c *Client) FollowSession(ctx context.Context, sessionID string, afterSeq int64) iter.Seq2[*memoryv1.Event, error] {
	request := &memoryv1.WatchEventsRequest{SessionId: sessionID, AfterSeq: afterSeq}
	return receiveAll(ctx, func(ctx context.Context) (receiver[*memoryv1.WatchEventsResponse], error) {
		return c.Memory.WatchEvents(ctx, request)
	}, (*memoryv1.WatchEventsResponse).GetEvent)
}

type receiver[T any] interface{ Recv() (T, error) }

// receiveAll adapts a server stream to an iterator of the items unwrap picks from each message;
// the call lives as long as the iteration (stopping it cancels the call).
func receiveAll[M any, T comparable](ctx context.Context, open func(context.Context) (receiver[M], error),
	unwrap func(M) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := open(ctx)
		if err != nil {
			yield(zero, asError(err))
			return
		}
		for {
			message, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(zero, asError(err))
				return
			}
			if item := unwrap(message); item != zero && !yield(item, nil) {
				return
			}
		}
	}
}
