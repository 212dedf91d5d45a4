package dev.agentmesh.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.agentmesh.common.v1.RunEvent;
import dev.agentmesh.gateway.v1.ChatResponse;
import dev.agentmesh.memory.v1.Event;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The SDK against a live mesh with examples/coordinator-worker.yaml applied. The gateway's address
 * and a user's credentials come from AGENTMESH_ADDRESS, AGENTMESH_EMAIL and AGENTMESH_PASSWORD
 * (tests/e2e/test_sdks.py sets them); without them the tests are skipped.
 */
class MeshTest {
  private AgentMesh mesh;

  @BeforeEach
  void signIn() {
    String address = System.getenv("AGENTMESH_ADDRESS");
    assumeTrue(address != null && !address.isEmpty(), "AGENTMESH_ADDRESS is not set (no mesh to test against)");
    mesh = AgentMesh.signIn(address, System.getenv("AGENTMESH_EMAIL"), System.getenv("AGENTMESH_PASSWORD"));
  }

  @AfterEach
  void close() {
    if (mesh != null) {
      mesh.close();
    }
  }

  private List<RunEvent> delegatingChat() {
    List<RunEvent> events = new ArrayList<>();
    try (EventStream<RunEvent> stream = mesh.streamChat("demo/coordinator", "Please process task 42")) {
      stream.forEachRemaining(events::add);
    }
    assertFalse(events.isEmpty(), "no events");
    return events;
  }

  @Test
  void streamChatDelegates() {
    List<RunEvent> events = delegatingChat();
    RunEvent first = events.get(0);
    RunEvent last = events.get(events.size() - 1);
    assertTrue(first.hasRunStarted() && !first.getSessionId().isEmpty(), "first event is not the run's start: " + first);
    assertTrue(
        events.stream().anyMatch(e -> e.getDelegationPathCount() > 0 && e.hasRunCompleted()),
        "no run_completed of the worker (with a delegation path) arrived");
    assertTrue(last.hasRunCompleted(), "the stream does not end with run_completed: " + last);
    assertEquals(0, last.getDelegationPathCount(), "the last event is not the addressed run's");
    assertEquals(first.getRunId(), last.getRunId());
    assertTrue(last.getRunCompleted().getContent().contains("worker processed task 42"), last.getRunCompleted().getContent());
  }

  @Test
  void chatAnswers() {
    ChatResponse answer = mesh.chat("demo/coordinator", "Please process task 42");
    assertFalse(answer.getSessionId().isEmpty());
    assertTrue(answer.getContent().contains("task 42"), answer.getContent());
  }

  @Test
  void unknownAgentIsNotFound() {
    AgentMeshException error =
        assertThrows(
            AgentMeshException.class,
            () -> {
              try (EventStream<RunEvent> stream = mesh.streamChat("demo/no-such-agent", "hello")) {
                stream.forEachRemaining(event -> {});
              }
            });
    assertEquals(Status.Code.NOT_FOUND, error.code());
    assertEquals("AGENT_NOT_FOUND", error.reason());
  }

  @Test
  void aWrongPasswordIsUnauthenticated() {
    AgentMeshException error =
        assertThrows(
            AgentMeshException.class,
            () -> AgentMesh.signIn(System.getenv("AGENTMESH_ADDRESS"), System.getenv("AGENTMESH_EMAIL"), "not the password"));
    assertEquals(Status.Code.UNAUTHENTICATED, error.code());
  }

  @Test
  void sessionEventsPageAndFollow() {
    String session = delegatingChat().get(0).getSessionId();

    List<Long> seqs = new ArrayList<>();
    int pages = 0;
    String pageToken = "";
    do {
      EventPage page = mesh.listEvents(session, 2, pageToken, 0);
      assertTrue(page.events().size() <= 2, "page of " + page.events().size() + " events with page size 2");
      pages++;
      page.events().forEach(event -> seqs.add(event.getSeq()));
      pageToken = page.nextPageToken();
    } while (!pageToken.isEmpty());
    assertTrue(pages >= 2, "expected several pages, got " + pages);
    assertEquals(LongStream.rangeClosed(1, seqs.size()).boxed().toList(), seqs, "seqs are not 1..n in order");

    assertEquals(seqs, mesh.allEvents(session, 3).stream().map(Event::getSeq).toList());

    List<Long> followed = new ArrayList<>();
    try (EventStream<Event> stream = mesh.followSession(session, 2)) {
      for (Event event : stream) {
        followed.add(event.getSeq());
        if (event.getSeq() == seqs.get(seqs.size() - 1)) {
          break; // the rest would arrive only when the session grows; closing hangs up
        }
      }
    }
    assertEquals(seqs.subList(2, seqs.size()), followed);
  }
}
