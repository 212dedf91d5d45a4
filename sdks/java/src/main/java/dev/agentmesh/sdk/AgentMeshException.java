package dev.agentmesh.sdk;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.Map;

/**
 * Every failure of an agentmesh call: the gRPC status code, the server's message, and the
 * {@code google.rpc.ErrorInfo} reason, domain and metadata decoded from the
 * {@code grpc-status-details-bin} trailer (for example {@code AGENT_NOT_FOUND}).
 */
public final class AgentMeshException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final String reason;
  private final String domain;
  private final Map<String, String> metadata;

  AgentMeshException(Status.Code code, String message, ErrorInfo info, Throwable cause) {
    super(code + ": " + message + (info.getReason().isEmpty() ? "" : " [" + info.getReason() + "]"), cause);
    this.code = code;
    this.reason = info.getReason();
    this.domain = info.getDomain();
    this.metadata = Map.copyOf(info.getMetadataMap());
  }

  /** The gRPC status code, e.g. {@code NOT_FOUND}. */
  public Status.Code code() {
    return code;
  }

  /** The ErrorInfo reason, e.g. {@code AGENT_NOT_FOUND}; empty when the server sent none. */
  public String reason() {
    return reason;
  }

  /** The ErrorInfo domain; empty when the server sent none. */
  public String domain() {
    return domain;
  }

  /** The ErrorInfo metadata (what the reason is about, e.g. the agent). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /** The typed error for a failed call; non-gRPC failures are wrapped as UNKNOWN. */
  static AgentMeshException from(Throwable error) {
    if (error instanceof AgentMeshException known) {
      return known;
    }
    Status status = Status.fromThrowable(error);
    com.google.rpc.Status details = StatusProto.fromThrowable(error);
    ErrorInfo info = ErrorInfo.getDefaultInstance();
    if (details != null) {
      for (Any detail : details.getDetailsList()) {
        if (detail.is(ErrorInfo.class)) {
          try {
            info = detail.unpack(ErrorInfo.class);
          } catch (InvalidProtocolBufferException unreadable) {
            // An unreadable detail leaves the code and message, which are still right.
          }
          break;
        }
      }
    }
    String message = status.getDescription() != null ? status.getDescription() : String.valueOf(error);
    return new AgentMeshException(status.getCode(), message, info, error);
  }
}
