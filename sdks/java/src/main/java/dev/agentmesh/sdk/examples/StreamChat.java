package dev.agentmesh.sdk.examples;

import dev.agentmesh.common.v1.RunEvent;
import dev.agentmesh.sdk.AgentMesh;
import dev.agentmesh.sdk.EventStream;

/** Streams a delegating chat from a mesh with examples/coordinator-worker.yaml applied. */
public final class StreamChat {
  private StreamChat() {}

  /** Prints each run's answer as it completes: the worker's mid-stream, the coordinator's last. */
  public static void main(String[] args) {
    String address = System.getenv().getOrDefault("AGENTMESH_ADDRESS", "127.0.0.1:50050");
    try (AgentMesh mesh = AgentMesh.signIn(address, System.getenv("AGENTMESH_EMAIL"), System.getenv("AGENTMESH_PASSWORD"));
        EventStream<RunEvent> events = mesh.streamChat("demo/coordinator", "Please process task 42")) {
      for (RunEvent event : events) {
        if (event.hasRunCompleted()) {
          System.out.println(event.getDelegationPathList() + " " + event.getAgent() + ": " + event.getRunCompleted().getContent());
        }
      }
    }
  }
}
