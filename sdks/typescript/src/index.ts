/**
 * The agentmesh TypeScript SDK: {@link AgentMesh} over the generated gRPC clients, errors as
 * {@link AgentMeshError}. The generated message types are re-exported for typed events.
 */
export { AgentMesh, type ConnectOptions, type EventPage, type ListEventsOptions } from "./client.js";
export { AgentMeshError, Code } from "./errors.js";
export * from "./gen/agentmesh/common/v1/run_pb.js";
export * from "./gen/agentmesh/gateway/v1/gateway_service_pb.js";
export { EventType, type Event, type Session } from "./gen/agentmesh/memory/v1/resources_pb.js";
