// Streams one chat from agentmesh's public gRPC API (GatewayService/StreamChat) with the stock
// Node.js gRPC client, loading the contract straight from protos/. Prints one JSON line per
// streamed event (after a first line with the session id from the response headers) and exits 0
// when the stream ends; on a gRPC error it prints {"code", "details"} to stderr and exits 2.
//
//   node stream_chat.js HOST:PORT ACCESS_TOKEN PROJECT_SLUG/AGENT_NAME MESSAGE

"use strict";

const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const [address, token, agent, message] = process.argv.slice(2);
if (!address || !token || !agent || !message) {
  console.error("usage: node stream_chat.js HOST:PORT ACCESS_TOKEN PROJECT/AGENT MESSAGE");
  process.exit(64);
}

const definition = protoLoader.loadSync("agentmesh/gateway/v1/gateway_service.proto", {
  includeDirs: [path.resolve(__dirname, "..", "..", "protos")],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const { GatewayService } = grpc.loadPackageDefinition(definition).agentmesh.gateway.v1;
const client = new GatewayService(address, grpc.credentials.createInsecure());

const metadata = new grpc.Metadata();
metadata.set("authorization", `Bearer ${token}`);
const call = client.StreamChat({ agent, message }, metadata);

call.on("metadata", (headers) => {
  console.log(JSON.stringify({ session_id: String(headers.get("x-session-id")[0] || "") }));
});
call.on("data", (response) => console.log(JSON.stringify(response.event)));
call.on("error", (error) => {
  console.error(JSON.stringify({ code: grpc.status[error.code], details: error.details }));
  process.exit(2);
});
call.on("end", () => process.exit(0));
