import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/**
 * An error the mesh answered with: the gRPC status code plus the `google.rpc.ErrorInfo` the
 * services attach to every error (decoded from the `grpc-status-details-bin` trailer).
 *
 * `reason` is the UPPER_SNAKE reason (e.g. "AGENT_NOT_FOUND"), empty when the status carried none
 * (a transport failure, say); `code` is the gRPC code, `codeName` its name ("NOT_FOUND").
 */
export class AgentMeshError extends Error {
  override readonly name = "AgentMeshError";

  constructor(
    message: string,
    readonly code: Code,
    readonly reason: string,
    readonly domain: string,
    readonly metadata: Readonly<Record<string, string>>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The gRPC code's canonical name, e.g. "NOT_FOUND". */
  get codeName(): string {
    return Code[this.code]
      .replace(/([a-z])([A-Z])/g, "$1_$2")
      .toUpperCase();
  }

  /** Wraps whatever a call threw; an AgentMeshError passes through unchanged. */
  static from(error: unknown): AgentMeshError {
    if (error instanceof AgentMeshError) {
      return error;
    }
    const connect = ConnectError.from(error);
    const [info] = connect.findDetails(ErrorInfoSchema);
    return new AgentMeshError(
      connect.rawMessage,
      connect.code,
      info?.reason ?? "",
      info?.domain ?? "",
      { ...(info?.metadata ?? {}) },
      { cause: error },
    );
  }
}

export { Code };
