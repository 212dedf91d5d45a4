"""What the `agentmesh apply` tests share: a manifest declaring every kind of object, the changes
applying it to an empty mesh makes, and helpers to apply a text and read the changes."""

from __future__ import annotations

import textwrap

from agentmesh.cli.apply.document import load_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.support import RecordingRegistry

MESH_YAML = textwrap.dedent(
    """\
    version: 1
    agent_types:
      - name: Coordinator
        slug: coordinator
        description: Splits work and hands it to workers
        expertise: [planning, delegation]
        personality_prompt: |
          You coordinate. Delegate each task to the worker.
        primary_model: mock
        fallback_models: [mock]
        model_params: {temperature: 0.2, max_tokens: 500}
        tools: [exit_loop]
        mcp_servers:
          - name: files
            transport: stdio
            command: python
            args: [-m, files_server]
            env: {ROOT: /data}
        kind: llm
        max_steps: 5
        is_active: true
      - name: Worker
        description: Does one task
        primary_model: mock
      - name: Pipeline
        slug: pipeline
        kind: sequential
        sub_agents: [worker]
        max_iterations: 3
    projects:
      - name: Demo
        slug: demo
        description: A coordinator and a worker
        agents:
          - name: coordinator
            type: coordinator
            config:
              max_steps: 4
              network_access: [worker]
              mock_responses:
                - content: ""
                  tool_calls: [{name: delegate, arguments: {agent: worker, task: Process task 42}}]
                - All done.
          - name: worker
            type: worker
            config:
              instructions: You process tasks.
              model_params: {temperature: 0}
              network_access: [coordinator]
              mock_responses: [Task 42 processed.]
          - name: pipeline
            type: pipeline
            config:
              sub_agents: [worker]
              max_iterations: 2
              double_texting: reject
    """
)

ALL_CREATED = [
    Change("agent type", "coordinator", Action.CREATE),
    Change("agent type", "worker", Action.CREATE),
    Change("agent type", "pipeline", Action.CREATE),
    Change("project", "demo", Action.CREATE),
    Change("agent", "demo/coordinator", Action.CREATE),
    Change("agent", "demo/worker", Action.CREATE),
    Change("agent", "demo/pipeline", Action.CREATE),
]


async def apply_text(
    text: str, registry: RecordingRegistry, caller: Connection, *, dry_run: bool = False
) -> list[Change]:
    return await apply_manifest(load_manifest(text), registry, metadata=caller.metadata, dry_run=dry_run)


def actions(changes: list[Change]) -> dict[str, tuple[Action, tuple[str, ...]]]:
    return {change.ref: (change.action, change.fields) for change in changes}


AGENT = "projects[0].agents[1]"


def cli_env() -> dict[str, str | None]:
    names = (
        "AGENTMESH_EMAIL",
        "AGENTMESH_PASSWORD",
        "AGENTMESH_TOKEN",
        "AGENTMESH_GATEWAY_ADDRESS",
        "AGENTMESH_REGISTRY_ADDRESS",
    )
    return dict.fromkeys(names)
