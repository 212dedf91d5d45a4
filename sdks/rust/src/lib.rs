//! A client for an agentmesh gateway over gRPC: sign in, stream chats with agents as typed
//! events, read a session's events page by page and follow a session live.
//!
//! The generated messages and clients are in [`proto`]; [`Client`] wraps the common calls and
//! exposes the generated clients for everything else.

use std::pin::Pin;

use tokio_stream::{Stream, StreamExt};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request};
use tonic_types::StatusExt;

/// The generated code, one module per proto package.
pub mod proto {
    /// `agentmesh.common.v1`: run events.
    pub mod common {
        /// Version 1.
        pub mod v1 {
            tonic::include_proto!("agentmesh.common.v1");
        }
    }
    /// `agentmesh.gateway.v1`: chat.
    pub mod gateway {
        /// Version 1.
        pub mod v1 {
            tonic::include_proto!("agentmesh.gateway.v1");
        }
    }
    /// `agentmesh.memory.v1`: sessions and their events.
    pub mod memory {
        /// Version 1.
        pub mod v1 {
            tonic::include_proto!("agentmesh.memory.v1");
        }
    }
    /// `agentmesh.registry.v1`: users, projects and agents.
    pub mod registry {
        /// Version 1.
        pub mod v1 {
            tonic::include_proto!("agentmesh.registry.v1");
        }
    }
}

use proto::common::v1::RunEvent;
use proto::gateway::v1::gateway_service_client::GatewayServiceClient;
use proto::gateway::v1::{ChatRequest, ChatResponse, StreamChatRequest};
use proto::memory::v1::memory_service_client::MemoryServiceClient;
use proto::memory::v1::{Event, ListEventsRequest, WatchEventsRequest};
use proto::registry::v1::registry_service_client::RegistryServiceClient;
use proto::registry::v1::LoginRequest;

/// The SDK's version, which follows the contract's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A failure of a call: the gRPC code and message plus the `google.rpc.ErrorInfo` the services
/// attach to every error (decoded from `grpc-status-details-bin`). `reason` is UPPER_SNAKE, e.g.
/// `AGENT_NOT_FOUND`; empty when the status carried none (a transport failure, say).
#[derive(Debug, thiserror::Error)]
#[error("agentmesh: {code:?} ({reason}): {message}")]
pub struct Error {
    pub code: Code,
    pub message: String,
    pub reason: String,
    pub domain: String,
    pub metadata: std::collections::HashMap<String, String>,
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        let info = status.get_details_error_info();
        Error {
            code: status.code(),
            message: status.message().to_string(),
            reason: info.as_ref().map(|i| i.reason.clone()).unwrap_or_default(),
            domain: info.as_ref().map(|i| i.domain.clone()).unwrap_or_default(),
            metadata: info.map(|i| i.metadata).unwrap_or_default(),
        }
    }
}

impl Error {
    /// An error raised on this side of the connection: no reason, domain or metadata.
    fn local(code: Code, message: String) -> Self {
        Error {
            code,
            message,
            reason: String::new(),
            domain: String::new(),
            metadata: Default::default(),
        }
    }
}

impl From<tonic::transport::Error> for Error {
    fn from(error: tonic::transport::Error) -> Self {
        Error::local(Code::Unavailable, error.to_string())
    }
}

/// A stream of items or the error that ended it.
pub type ResultStream<T> = Pin<Box<dyn Stream<Item = Result<T, Error>> + Send>>;

/// One page of a session's events.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Token for the next page; empty on the last.
    pub next_page_token: String,
}

/// A client of one gateway. It keeps the access token and sends it as
/// `authorization: Bearer <token>` with every call. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    pub gateway: GatewayServiceClient<Channel>,
    pub memory: MemoryServiceClient<Channel>,
    pub registry: RegistryServiceClient<Channel>,
    token: Option<String>,
}

impl Client {
    /// Connects to the gateway at `address` ("host:port" for plaintext, or a URL).
    pub async fn connect(address: &str) -> Result<Self, Error> {
        let url = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        let channel = Endpoint::from_shared(url)?.connect().await?;
        Ok(Client {
            gateway: GatewayServiceClient::new(channel.clone()),
            memory: MemoryServiceClient::new(channel.clone()),
            registry: RegistryServiceClient::new(channel),
            token: None,
        })
    }

    /// Connects and signs in with e-mail and password.
    pub async fn sign_in(address: &str, email: &str, password: &str) -> Result<Self, Error> {
        let mut client = Self::connect(address).await?;
        let request = LoginRequest {
            email: email.into(),
            password: password.into(),
        };
        let response = client.registry.login(request).await?.into_inner();
        client.token = response.tokens.map(|tokens| tokens.access_token);
        Ok(client)
    }

    /// Uses an access token instead of signing in.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The access token the client sends.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    fn request<T>(&self, message: T) -> Result<Request<T>, Error> {
        let mut request = Request::new(message);
        if let Some(token) = &self.token {
            let value = MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                Error::local(
                    Code::InvalidArgument,
                    "the token is not valid header text".into(),
                )
            })?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }

    /// Streams a chat with `agent` ("project/agent"): every step of the run as a typed event
    /// (match on `event.kind`). Delegated agents' events, their `RunCompleted` included, arrive
    /// mid-stream with a non-empty `delegation_path`; the stream ends with the addressed agent's
    /// `RunCompleted` or `RunFailed`. An empty `session_id` starts a new session.
    pub async fn stream_chat(
        &self,
        agent: &str,
        message: &str,
        session_id: &str,
    ) -> Result<ResultStream<RunEvent>, Error> {
        let request = self.request(StreamChatRequest {
            agent: agent.into(),
            message: message.into(),
            session_id: session_id.into(),
            ..Default::default()
        })?;
        let stream = self
            .gateway
            .clone()
            .stream_chat(request)
            .await?
            .into_inner();
        Ok(Box::pin(stream.filter_map(|item| match item {
            Ok(response) => response.event.map(Ok),
            Err(status) => Some(Err(Error::from(status))),
        })))
    }

    /// Chats with `agent` and returns the final answer with its session and run ids and usage.
    pub async fn chat(
        &self,
        agent: &str,
        message: &str,
        session_id: &str,
    ) -> Result<ChatResponse, Error> {
        let request = self.request(ChatRequest {
            agent: agent.into(),
            message: message.into(),
            session_id: session_id.into(),
        })?;
        Ok(self.gateway.clone().chat(request).await?.into_inner())
    }

    /// One page of a session's events, in seq order: at most `page_size` (0: the service's
    /// default), continuing from `page_token` (empty: the first page).
    pub async fn list_events(
        &self,
        session_id: &str,
        page_size: i32,
        page_token: &str,
    ) -> Result<EventPage, Error> {
        let request = self.request(ListEventsRequest {
            session_id: session_id.into(),
            page_size,
            page_token: page_token.into(),
            ..Default::default()
        })?;
        let response = self.memory.clone().list_events(request).await?.into_inner();
        Ok(EventPage {
            events: response.events,
            next_page_token: response.next_page_token,
        })
    }

    /// Follows a session: its events after `after_seq` (0: from the oldest kept), then each new
    /// one as it is recorded, until the stream is dropped.
    pub async fn follow_session(
        &self,
        session_id: &str,
        after_seq: i64,
    ) -> Result<ResultStream<Event>, Error> {
        let request = self.request(WatchEventsRequest {
            session_id: session_id.into(),
            after_seq,
        })?;
        let stream = self
            .memory
            .clone()
            .watch_events(request)
            .await?
            .into_inner();
        Ok(Box::pin(stream.filter_map(|item| match item {
            Ok(response) => response.event.map(Ok),
            Err(status) => Some(Err(Error::from(status))),
        })))
    }
}
