"""The gateway: agentmesh's edge. Authentication, authorization, routing to executors, and every
public face — gRPC (GatewayService plus the registry's and memory's APIs), REST/JSON, agent
endpoints and the OpenAI-compatible API.

Where things are:
  app.py         composition root: channels, run router, guard, core, faces, servers
  settings.py    GatewaySettings (AGENTMESH_GATEWAY_*)
  policy.py      THE authorization table: who may call every RPC and every HTTP route
  access.py      AccessGuard (applies the table) and the gRPC policy interceptor
  ratelimit.py   per-user token buckets
  gateway.py     the core every face adapts: AgentGateway (chat, terminate-and-cancel,
                 session paging); executor choice and failover are the executor client's
                 RunRouter
  chat_stream.py a started chat as the faces read it: ChatStream (its events, followed in the
                 log when the executor's stream breaks) and AnswerStream (the addressed agent's
                 answer)
  forwarding.py  registry and memory RPCs served by forwarding, as the caller
  servicer.py    GatewayService Chat / StreamChat, and the registry RPCs the core serves
  models.py      Caller, AgentRef, ChatResult
  errors.py      the gateway's own DomainErrors
  http/          FastAPI app: rest.py (DESIGN §6 REST), agents.py (agent endpoints), openai.py
                 (OpenAI-compatible), errors.py (DomainError → HTTP status, in one table),
                 limits.py (body size), schemas.py / convert.py (JSON models ↔ protos)
"""
