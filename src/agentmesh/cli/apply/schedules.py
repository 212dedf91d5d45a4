"""Schedules in an apply file (a project's `schedules`): planned against the project's schedules,
found by name, and written after the project's agents (a schedule names one of them). A new
schedule runs as whoever applied the file; an updated one keeps its creator."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentmesh.cli.apply.document import DeclaredProject
from agentmesh.cli.apply.plan import Action, Change, differing, overlay
from agentmesh.cli.client import Metadata
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.declarations import check_schedule
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import unary
from agentmesh.runtime.errors import FieldViolation

_LIST_PAGE_SIZE = 100


@dataclass
class ScheduleStep:
    """A schedule to write: `message` is the whole state to write (with its id when it exists);
    a new one is created in the project with slug `project_slug`."""

    change: Change
    path: str
    project_slug: str
    message: resources_pb2.Schedule


async def plan_schedules(
    registry: RegistryClient,
    project: DeclaredProject,
    project_id: str,
    agent_names: set[str],
    problems: list[FieldViolation],
    *,
    metadata: Metadata,
) -> list[ScheduleStep]:
    """The steps for the project's declared schedules (problems appended to `problems`);
    `agent_names` are the agents the project will have."""
    current = {s.name: s for s in await _existing(registry, project_id, metadata)} if project_id else {}
    steps = []
    for declared in project.schedules:
        existing = current.get(declared.message.name)
        if existing is None:
            wanted, action, changed = declared.message, Action.CREATE, ()
        else:
            wanted = overlay(existing, declared.message, declared.declared)
            changed = differing(declared.declared, wanted, existing)
            action = Action.UPDATE if changed else Action.UNCHANGED
        if action is not Action.UNCHANGED:
            problems += check_schedule(wanted, field=declared.path)
            if wanted.agent and wanted.agent not in agent_names:
                problems.append(
                    FieldViolation(f"{declared.path}.agent", "no agent of this project has that name")
                )
        change = Change("schedule", f"{project.slug}/{declared.message.name}", action, changed)
        steps.append(ScheduleStep(change, declared.path, project.slug, wanted))
    return steps


async def write_schedule(
    registry: RegistryClient, step: ScheduleStep, project_id: str, *, metadata: Metadata
) -> None:
    """Creates or updates the step's schedule (nothing for an unchanged one)."""
    if step.change.action is Action.CREATE:
        schedule = resources_pb2.Schedule()
        schedule.CopyFrom(step.message)
        schedule.project_id = project_id
        await unary(
            registry.stub.CreateSchedule, pb.CreateScheduleRequest(schedule=schedule), metadata=metadata
        )
    elif step.change.action is Action.UPDATE:
        request = pb.UpdateScheduleRequest(schedule=step.message)
        request.update_mask.paths.extend(step.change.fields)
        await unary(registry.stub.UpdateSchedule, request, metadata=metadata)


async def _existing(
    registry: RegistryClient, project_id: str, metadata: Metadata
) -> Iterable[resources_pb2.Schedule]:
    found: list[resources_pb2.Schedule] = []
    token = ""
    while True:
        page = await unary(
            registry.stub.ListSchedules,
            pb.ListSchedulesRequest(project_id=project_id, page_size=_LIST_PAGE_SIZE, page_token=token),
            metadata=metadata,
        )
        found += page.schedules
        token = page.next_page_token
        if not token:
            return found
