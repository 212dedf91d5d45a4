package dev.agentmesh.sdk;

import dev.agentmesh.memory.v1.Event;
import java.util.List;

/**
 * One page of a session's events, in {@code seq} order.
 *
 * @param events the events of this page
 * @param nextPageToken the token for the next page; empty on the last page
 */
public record EventPage(List<Event> events, String nextPageToken) {
  /** Whether another page follows. */
  public boolean hasNextPage() {
    return !nextPageToken.isEmpty();
  }
}
