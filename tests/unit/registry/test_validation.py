"""Input rules: DNS-label slugs, agent names as display text, and config references to other agents."""

from __future__ import annotations

import pytest

from agentmesh.registry.models import AgentConfig
from agentmesh.registry.validation import check_agent_config, check_agent_name, is_dns_label, slugify


@pytest.mark.parametrize("name", ["a", "worker", "w-1", "1a", "a" * 63, "a-b-c"])
def test_dns_labels(name: str) -> None:
    assert is_dns_label(name)


@pytest.mark.parametrize("name", ["", "A", "-a", "a-", "a_b", "a.b", "a b", "a" * 64, "é"])
def test_not_dns_labels(name: str) -> None:
    assert not is_dns_label(name)


@pytest.mark.parametrize(
    ("text", "slug"),
    [("My Project", "my-project"), ("  Hello, World!  ", "hello-world"), ("___", ""), ("x" * 70, "x" * 63)],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug
    assert slug == "" or is_dns_label(slug)


def test_config_references_must_be_other_agents_of_the_project() -> None:
    ok = AgentConfig(network_access=["a", "b"], sub_agents=["a"])
    assert check_agent_config(ok, agent_name="boss", project_agents=["a", "b", "boss"]) == []
    violations = check_agent_config(
        AgentConfig(network_access=["a", "ghost"], sub_agents=["boss"]),
        agent_name="boss",
        project_agents=["a", "boss"],
    )
    assert {(v.field, v.description) for v in violations} == {
        ("agent.config.network_access", "no agent named 'ghost' in this project"),
        ("agent.config.sub_agents", "an agent cannot name itself ('boss')"),
    }


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("My PO Agent", None),
        ("Agent 1", None),
        ("ß-ünïcödé ✓", None),
        ("x" * 100, None),
        ("", "is required"),
        ("   ", "is required"),
        ("x" * 101, "must be at most 100 characters"),
        ("tab\there", "must not contain control characters"),
        ("new\nline", "must not contain control characters"),
        ("zero\u200bwidth", "must not contain control characters"),
        (" padded", "must not begin or end with whitespace"),
    ],
)
def test_agent_names_are_display_text(name: str, problem: str | None) -> None:
    violations = check_agent_name(name)
    assert [(v.field, v.description) for v in violations] == (
        [] if problem is None else [("agent.name", problem)]
    )


def test_config_references_name_agents_by_slug_or_name() -> None:
    refs = ["my-writer", "My Writer", "boss", "The Boss"]
    ok = AgentConfig(network_access=["My Writer"], sub_agents=["my-writer"])
    assert check_agent_config(ok, agent_name="The Boss", agent_slug="boss", project_agents=refs) == []
    for itself in ("boss", "The Boss"):
        violations = check_agent_config(
            AgentConfig(network_access=[itself]),
            agent_name="The Boss",
            agent_slug="boss",
            project_agents=refs,
        )
        assert [v.field for v in violations] == ["agent.config.network_access"], itself
    bad = check_agent_config(
        AgentConfig(network_access=["bad\x00ref"]), agent_name="The Boss", project_agents=refs
    )
    assert [v.field for v in bad] == ["agent.config.network_access"]
