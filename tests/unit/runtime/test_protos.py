"""The well-known-type readers every convert module shares: whole numbers come back as ints,
and a field converts as its kind says, both ways."""

from __future__ import annotations

from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.protos import (
    field_value,
    list_to_python,
    list_value,
    set_field,
    struct,
    struct_to_dict,
)


def test_whole_numbers_come_back_as_ints_and_the_rest_as_is() -> None:
    values = {"max_tokens": 500, "temperature": 0.5, "nested": {"n": [1, 2.5, "x"]}, "none": None}
    assert struct_to_dict(struct(values)) == values
    assert isinstance(struct_to_dict(struct(values))["max_tokens"], int)
    assert list_to_python(list_value([3, "a", {"b": 4}])) == [3, "a", {"b": 4}]
    assert struct_to_dict(struct({})) == {}


def test_each_field_kind_round_trips() -> None:
    plain = {
        "instructions": "be brief",
        "max_steps": 3,
        "model_params": {"max_tokens": 500},
        "tools": ["search"],
        "mock_responses": ["one", {"k": 2}],
    }
    config = resources_pb2.AgentConfig()
    for name, value in plain.items():
        set_field(config, name, value)
    assert {name: field_value(getattr(config, name)) for name in plain} == plain
    assert not config.HasField("sub_agents")
