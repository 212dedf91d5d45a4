"""`agentmesh apply` with an agent type's budgets — the prompt's (`context_budget_tokens`, with its
`compaction_model` and `compaction_prompt`) and a run's (`run_budget`): made so, left alone when
unchanged, updated when they change, and a negative one named by its path before anything is
written."""

from __future__ import annotations

import textwrap

import pytest

from agentmesh.cli.apply.document import ApplyError
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot

BUDGETED_YAML = textwrap.dedent(
    """\
    agent_types:
      - name: Budgeted Type
        slug: budgeted-type
        primary_model: mock
        context_budget_tokens: 32000
        compaction_model: mock-small
        compaction_prompt: Keep every number.
        run_budget: {max_tokens: 20000, max_cost: 0.05}
    """
)


async def test_budgets_are_applied_once_then_left_alone_then_updated(
    recording: RecordingRegistry, admin: Connection
) -> None:
    created = await apply_text(BUDGETED_YAML, recording, admin)
    assert [change.action for change in created] == [Action.CREATE]
    stored = (await snapshot(recording, admin.metadata))["agent_types"]["budgeted-type"]
    assert stored["contextBudgetTokens"] == 32000
    assert stored["compactionModel"] == "mock-small"
    assert stored["compactionPrompt"] == "Keep every number."
    assert stored["runBudget"] == {"maxTokens": "20000", "maxCost": 0.05}
    recording.writes.clear()

    again = await apply_text(BUDGETED_YAML, recording, admin)
    assert again == [Change(c.kind, c.ref, Action.UNCHANGED) for c in created]
    assert recording.writes == []

    changed = BUDGETED_YAML.replace("32000", "16000").replace("max_cost: 0.05", "max_cost: 0.5")
    changed = changed.replace("Keep every number.", "Keep every name.")
    changes = await apply_text(changed, recording, admin)
    assert actions(changes) == {
        "budgeted-type": (Action.UPDATE, ("context_budget_tokens", "compaction_prompt", "run_budget"))
    }
    stored = (await snapshot(recording, admin.metadata))["agent_types"]["budgeted-type"]
    assert stored["contextBudgetTokens"] == 16000
    assert stored["compactionPrompt"] == "Keep every name."
    assert stored["runBudget"] == {"maxTokens": "20000", "maxCost": 0.5}


async def test_a_negative_budget_is_named_by_its_path(
    recording: RecordingRegistry, admin: Connection
) -> None:
    with pytest.raises(ApplyError) as refused:
        await apply_text(BUDGETED_YAML.replace("max_tokens: 20000", "max_tokens: -1"), recording, admin)
    assert "agent_types[0].run_budget.max_tokens" in str(refused.value)
    assert recording.writes == []
