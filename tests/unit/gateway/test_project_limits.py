"""A project's requests a minute and open streams as one gateway counts them, on a fake clock."""

from __future__ import annotations

import pytest

from agentmesh.gateway.project_limits import LimitsInForce, OpenStreams, RequestRates, admitted_project
from agentmesh.runtime.errors import QuotaExceeded
from tests.unit.gateway.test_ratelimit import Clock


def test_a_minutes_requests_then_one_each_sixtieth_of_a_minute() -> None:
    clock = Clock()
    rates = RequestRates(clock=clock)
    project = LimitsInForce("p1", requests_per_minute=120)
    for _ in range(120):
        rates.admit(project)
    with pytest.raises(QuotaExceeded) as refused:
        rates.admit(project)
    assert refused.value.retry_after_seconds == 1  # 0.5 s, told in whole seconds
    assert refused.value.metadata["quota_limit"] == "requests_per_minute"
    assert refused.value.metadata["quota_subject"] == "project:p1"
    clock.now += 0.5
    rates.admit(project)
    rates.admit(LimitsInForce("p2", requests_per_minute=120))  # another project: its own minute
    for _ in range(1000):
        rates.admit(LimitsInForce("p3"))  # 0: unlimited


def test_a_stream_slot_is_freed_however_the_stream_ends() -> None:
    streams = OpenStreams(max_per_user=2)
    token = admitted_project.set(LimitsInForce("p1", open_streams=1))
    try:
        with pytest.raises(RuntimeError), streams.holding("ada"):
            assert streams.open_count("p1") == 1
            with pytest.raises(QuotaExceeded) as refused, streams.holding("bob"):
                pass
            assert refused.value.metadata["quota_limit"] == "open_streams"
            raise RuntimeError("the stream broke")
        assert streams.open_count("p1") == 0
        with streams.holding("ada"):
            assert streams.open_count("p1") == 1
    finally:
        admitted_project.reset(token)


def test_one_users_streams_are_capped_across_projects() -> None:
    streams = OpenStreams(max_per_user=1)
    with streams.holding("ada"):  # no project admitted: only the user counts
        with pytest.raises(QuotaExceeded) as refused, streams.holding("ada"):
            pass
        assert refused.value.metadata["quota_subject"] == "user:ada"
        with streams.holding("bob"):
            pass
