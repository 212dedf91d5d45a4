"""How much of everything a benchmark run measures: the full plan behind the published figures,
the smoke plan that only checks every figure is produced, and the sections a run can be limited to.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """How much of everything a run measures. Counts are per contender per round."""

    name: str
    rounds: int  # A/B rounds every comparison is interleaved over
    latency_calls: int  # one in flight: chat vs chain
    compare_calls: int  # one in flight: the other A/B comparisons (HTTP, tracing, history)
    warmup_calls: int
    burst_seconds: float  # one throughput burst
    # The append figures' rounds: with three, a figure moved by 10-17 % between two runs of the
    # same tree (docs/performance.md).
    append_rounds: int
    burst_max_calls: int
    concurrency_levels: tuple[int, ...]  # the chat/chain throughput sweep (details)
    delegation_calls: int
    history_long: int  # prior events of the long session (the figure names 10,000)
    history_short: int
    history_middle: int  # an extra point for the growth curve (details)
    streams: int  # concurrent open StreamChat streams (the figure names 5,000)
    stream_chunks: int
    stream_chunk_delay_seconds: float
    stream_channels: int
    stream_timeout_seconds: float
    # The tenants section: the measured tenant's chats per phase (quiet, then under attack), and
    # the hostile tenant's load: fan-out chats in flight, slow streams, idle watches, readers of a
    # history of `tenant_history_events` events of `tenant_event_bytes` each.
    tenant_calls: int
    tenant_fanout_chats: int
    tenant_streams: int
    tenant_stream_delay_seconds: float
    tenant_watches: int
    tenant_readers: int
    tenant_history_events: int
    tenant_event_bytes: int


FULL = Plan(
    name="full",
    rounds=3,
    latency_calls=100,
    compare_calls=60,
    warmup_calls=10,
    burst_seconds=3.0,
    append_rounds=6,
    burst_max_calls=20_000,
    concurrency_levels=(1, 8, 64),
    delegation_calls=12,
    history_long=10_000,
    history_short=10,
    history_middle=1_000,
    # 5,000 streams, as the target names. Each lives 6 x 15 s, so that all are open at once
    # even when starting them takes a minute on a loaded host; a stream that has not ended
    # after stream_timeout_seconds fails, which bounds the section.
    streams=5000,
    stream_chunks=6,
    stream_chunk_delay_seconds=15.0,
    stream_channels=250,
    stream_timeout_seconds=300.0,
    # As the probe that found one tenant could starve another: 250 slow streams, 200 watches,
    # pages of 24 events of 200 KB.
    tenant_calls=100,
    tenant_fanout_chats=4,
    tenant_streams=250,
    tenant_stream_delay_seconds=2.0,
    tenant_watches=200,
    tenant_readers=4,
    tenant_history_events=24,
    tenant_event_bytes=200_000,
)

SMOKE = Plan(
    name="smoke",
    rounds=2,
    latency_calls=5,
    compare_calls=3,
    warmup_calls=2,
    burst_seconds=0.3,
    append_rounds=2,
    burst_max_calls=200,
    concurrency_levels=(1, 8),
    delegation_calls=2,
    history_long=500,
    history_short=10,
    history_middle=100,
    streams=40,
    stream_chunks=3,
    stream_chunk_delay_seconds=0.3,
    stream_channels=4,
    stream_timeout_seconds=60.0,
    tenant_calls=10,
    tenant_fanout_chats=1,
    tenant_streams=10,
    tenant_stream_delay_seconds=0.2,
    tenant_watches=10,
    tenant_readers=1,
    tenant_history_events=4,
    tenant_event_bytes=20_000,
)


SECTIONS = ("chat", "tracing", "throughput", "http", "delegation", "history", "appends", "streams", "tenants")
