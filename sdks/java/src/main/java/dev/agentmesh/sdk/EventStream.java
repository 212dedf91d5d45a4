package dev.agentmesh.sdk;

import io.grpc.Context;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.function.Function;

/**
 * A server stream as a blocking {@link Iterator} that can also be used in a for-each loop once.
 * Closing it (try-with-resources) cancels the call, so breaking out of a loop early hangs up.
 * Failures surface from {@link #hasNext()} / {@link #next()} as {@link AgentMeshException}.
 *
 * @param <T> what the stream yields
 */
public final class EventStream<T> implements Iterator<T>, Iterable<T>, AutoCloseable {
  private final Context.CancellableContext context;
  private final Iterator<?> responses;
  private final Function<Object, T> unwrap;
  private boolean iterated;

  @SuppressWarnings("unchecked")
  <M> EventStream(Context.CancellableContext context, Iterator<M> responses, Function<M, T> unwrap) {
    this.context = context;
    this.responses = responses;
    this.unwrap = (Function<Object, T>) unwrap;
  }

  @Override
  public boolean hasNext() {
    try {
      boolean more = responses.hasNext();
      if (!more) {
        close();
      }
      return more;
    } catch (RuntimeException error) {
      close();
      throw AgentMeshException.from(error);
    }
  }

  @Override
  public T next() {
    if (!hasNext()) {
      throw new NoSuchElementException("the stream has ended");
    }
    try {
      return unwrap.apply(responses.next());
    } catch (RuntimeException error) {
      close();
      throw AgentMeshException.from(error);
    }
  }

  /** This stream itself; it can be iterated once. */
  @Override
  public Iterator<T> iterator() {
    if (iterated) {
      throw new IllegalStateException("an EventStream can be iterated only once");
    }
    iterated = true;
    return this;
  }

  /** Cancels the call (a no-op once the stream has ended). */
  @Override
  public void close() {
    context.cancel(null);
  }
}
