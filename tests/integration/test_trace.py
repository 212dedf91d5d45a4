"""One chat is ONE trace: gateway → executor → registry and memory, with correct parent → child
edges (in-process, in-memory exporter)."""

from __future__ import annotations

from opentelemetry.trace import SpanKind

from tests.mesh import MeshClient
from tests.polling import eventually

GATEWAY = "agentmesh.gateway.v1.GatewayService/StreamChat"
RUN = "agentmesh.internal.executor.v1.ExecutorService/Run"
FINISH = "agentmesh.internal.registry.v1.RegistryInternalService/FinishAgentRuns"
RESOLVE = "agentmesh.internal.registry.v1.RegistryInternalService/ResolveAgent"
APPEND = "agentmesh.memory.v1.MemoryService/AppendEvents"


def span_tree(spans) -> list[str]:
    """The spans as an indented list, children in start order."""
    children: dict[int | None, list] = {}
    ids = {s.context.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_time):
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(f"{'  ' * depth}{span.kind.name.lower()} {span.name}")
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def test_one_chat_is_one_trace_across_every_hop(spans, mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=["traced"])
    spans.clear()

    await client.stream_chat(seeded, "trace me")

    async def run_ended() -> bool:
        # The stream ends with the answer; the run's span a moment later, with its bookkeeping.
        return any(s.name == f"run {seeded.agent_name}" for s in spans.get_finished_spans())

    await eventually(run_ended, what="the run's span ended")
    finished = [s for s in spans.get_finished_spans()]
    chat = [s for s in finished if s.name == GATEWAY and s.kind == SpanKind.SERVER]
    assert len(chat) == 1
    trace_id = chat[0].context.trace_id
    in_trace = [s for s in finished if s.context.trace_id == trace_id]
    # Every span of the chat's work hangs off the gateway's: none lands in a second trace.
    # (Background work — executor health checks, discovery — makes traces of its own.)
    chat_work = ("run ", "step ", "chat ", "delegate ", RUN, APPEND, RESOLVE)
    stray = [s.name for s in finished if s.context.trace_id != trace_id and s.name.startswith(chat_work)]
    assert not stray, "\n".join(span_tree(finished))
    by_id = {s.context.span_id: s for s in in_trace}
    for span in in_trace:
        if span is not chat[0]:
            assert span.parent is not None and span.parent.span_id in by_id, f"orphan span {span.name}"

    def parent_of(span):
        return by_id[span.parent.span_id]

    executor_server = [s for s in in_trace if s.name == RUN and s.kind == SpanKind.SERVER]
    assert len(executor_server) == 1
    run_client = parent_of(executor_server[0])
    assert (run_client.name, run_client.kind) == (RUN, SpanKind.CLIENT)
    assert parent_of(run_client) is chat[0]

    registry_server = [s for s in in_trace if s.name == RESOLVE and s.kind == SpanKind.SERVER]
    assert len(registry_server) == 1
    assert parent_of(parent_of(registry_server[0])) is executor_server[0]

    memory_server = [s for s in in_trace if s.name == APPEND and s.kind == SpanKind.SERVER]
    assert len(memory_server) == 2, "user_message and agent_response"
    run_span = [s for s in in_trace if s.name == f"run {seeded.agent_name}"]
    assert len(run_span) == 1
    for span in memory_server:
        ancestor = parent_of(parent_of(span))
        while ancestor is not run_span[0] and ancestor.parent is not None:
            ancestor = parent_of(ancestor)
        assert ancestor is run_span[0], "memory appends happen inside the run"

    model_calls = [s for s in in_trace if s.attributes.get("gen_ai.system") == "mock"]
    assert len(model_calls) == 1
    assert model_calls[0].attributes["gen_ai.request.model"] == "mock"
    assert model_calls[0].attributes["gen_ai.usage.output_tokens"] == 1

    # The run's end reaches the registry with other runs' ends: a trace of its own, linked to
    # the run's span (and in no way an orphan of the chat's trace).
    async def end_reported() -> bool:
        return any(s.name == "finish runs" for s in spans.get_finished_spans())

    await eventually(end_reported, what="the run's end reported")
    finished = spans.get_finished_spans()
    (batch,) = [s for s in finished if s.name == "finish runs"]
    assert batch.context.trace_id != trace_id and batch.parent is None
    assert run_span[0].context.span_id in {link.context.span_id for link in batch.links}
    finish_server = [s for s in finished if s.name == FINISH and s.kind == SpanKind.SERVER]
    assert len(finish_server) == 1 and finish_server[0].context.trace_id == batch.context.trace_id
