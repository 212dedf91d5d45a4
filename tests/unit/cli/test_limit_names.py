"""The CLI's limit names, written out so that `agentmesh limits --help` imports no generated code,
are the API's: every field of `ProjectLimits` in its order, the decimal ones the costs."""

from __future__ import annotations

from agentmesh.cli.limits import COST_LIMITS, LIMIT_NAMES, parse_settings
from agentmesh.registry.v1 import resources_pb2


def test_the_cli_names_every_limit_the_api_has() -> None:
    fields = resources_pb2.ProjectLimits.DESCRIPTOR.fields
    assert tuple(field.name for field in fields) == LIMIT_NAMES
    assert tuple(field.name for field in fields if field.type == field.TYPE_DOUBLE) == COST_LIMITS


def test_settings_take_whole_numbers_and_dollar_amounts_by_name() -> None:
    assert parse_settings(["concurrent_runs=4", "cost_per_day=5.00", "tokens_per_day=default"]) == {
        "concurrent_runs": 4,
        "cost_per_day": 5.0,
        "tokens_per_day": None,
    }
