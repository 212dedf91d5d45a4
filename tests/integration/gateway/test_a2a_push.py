"""A2A push notifications through the gateway, with the official a2a-sdk client over each binding:
a task's configs are set, read, listed and deleted by who may read the task (never a stranger); a
bad or refused URL is the spec's invalid-params error naming the field, with nothing stored; and a
config given with the message that starts a task has the task's updates POSTed to a loopback
receiver (the mesh's egress allow-list permits loopback, as `--allow-loopback-egress` does) with
the client's token, through to completion. The card says it supports them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.client import A2AClientError, Client
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors

from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.delegating import asking_worker_and_coordinator
from tests.integration.gateway.support import Agent, Api, asking_agent
from tests.polling import eventually
from tests.webhook_receiver import Receiver, webhook_receiver

State = a2a_pb2.TaskState
pytestmark = pytest.mark.parametrize("binding", BINDINGS)
TOKEN = "client-token-7f3a"
CREDENTIALS = "receiver-credentials-91c2"


def _config(task_id: str, url: str, config_id: str = "") -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(
        task_id=task_id,
        id=config_id,
        url=url,
        token=TOKEN,
        authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS),
    )


async def _until_pushed(receiver: Receiver, *states: str, what: str) -> None:
    async def pushed() -> bool:
        return set(states) <= set(_states(receiver))

    await eventually(pushed, timeout=30, what=f"{what} pushed")


async def _answered(client: Client, task: a2a_pb2.Task, text: str) -> a2a_pb2.Task:
    """The task after the next message on it, which answers its question."""
    answer = send_request(text)
    answer.message.task_id = task.id
    return (await anext(client.send_message(answer))).task


def _states(receiver: Receiver) -> list[str]:
    """The task states pushed, one per delivery (a repeat of one carries the same webhook-id)."""
    unique = {r.headers["webhook-id"]: r for r in receiver.delivered()}
    return [json.loads(r.body)["statusUpdate"]["status"]["state"] for r in unique.values()]


@asynccontextmanager
async def watched_task(
    http: httpx.AsyncClient, binding: str, agent: Agent
) -> AsyncIterator[tuple[Receiver, Client, a2a_pb2.Task]]:
    """A loopback receiver, a client, and the task a message to `agent` started with a push
    config for the receiver."""
    card = await fetch_card(http, agent)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False) as client,
    ):
        request = send_request("book", task_push_notification_config=_config("", receiver.url, "w"))
        yield receiver, client, (await anext(client.send_message(request))).task


async def test_a_tasks_configs_are_set_read_listed_and_deleted(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    card = await fetch_card(http, agent)
    assert card.capabilities.push_notifications
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False) as client,
    ):
        task = (await anext(client.send_message(send_request("hi")))).task
        created = await client.create_task_push_notification_config(_config(task.id, receiver.url, "mine"))
        assert (created.id, created.task_id, created.url, created.token) == (
            "mine",
            task.id,
            receiver.url,
            TOKEN,
        )
        assert created.authentication.scheme == "Bearer" and not created.authentication.credentials
        other = await client.create_task_push_notification_config(_config(task.id, receiver.url))
        assert other.id and other.id != "mine"

        got = await client.get_task_push_notification_config(
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
        )
        assert got == created
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert sorted(c.id for c in listed.configs) == sorted(["mine", other.id])
        assert not any(c.authentication.credentials for c in listed.configs)

        await client.delete_task_push_notification_config(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
        )
        with pytest.raises(a2a_errors.TaskNotFoundError):
            await client.get_task_push_notification_config(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
            )
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == [other.id]

        # Not https (or http to an allow-listed host), or an address the egress policy refuses.
        for url in ("ftp://files.example/x", "http://10.20.30.40/hook", "https://10.20.30.40/hook"):
            with pytest.raises(a2a_errors.InvalidParamsError, match="url") as refused:
                await client.create_task_push_notification_config(_config(task.id, url, "bad"))
            assert TOKEN not in str(refused.value) and CREDENTIALS not in str(refused.value)
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"task_push_notification_config\.url"):
            await anext(
                client.send_message(
                    send_request("hi", task_push_notification_config=_config("", "ftp://x/y"))
                )
            )
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == [other.id]
        with pytest.raises(a2a_errors.TaskNotFoundError):
            await client.list_task_push_notification_configs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id="no-run~no-session")
            )

    stranger = await api.user()
    async with a2a_client(card, binding, stranger.token, streaming=False) as client:
        with pytest.raises((A2AClientError, a2a_errors.A2AError)):
            await client.list_task_push_notification_configs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
        with pytest.raises((A2AClientError, a2a_errors.A2AError)):
            await client.create_task_push_notification_config(_config(task.id, receiver.url, "theirs"))
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == [other.id]


async def test_a_tasks_updates_reach_its_receiver_with_the_token(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(mock_responses=["all done"])
    card = await fetch_card(http, agent)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False) as client,
    ):
        request = send_request("go", task_push_notification_config=_config("", receiver.url, "watch"))
        task = (await anext(client.send_message(request))).task
        assert task.status.state == State.TASK_STATE_COMPLETED

        def states() -> list[str]:
            return [json.loads(r.body)["statusUpdate"]["status"]["state"] for r in receiver.delivered()]

        async def both() -> bool:
            # Not ordered: each is its own delivery, made (and retried) on its own.
            return set(states()) == {"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}

        await eventually(both, timeout=30, what="the task's start and completion pushed")
        for received in receiver.delivered():
            update = json.loads(received.body)["statusUpdate"]
            assert (update["taskId"], update["contextId"]) == (task.id, task.context_id)
            assert received.headers["x-a2a-notification-token"] == TOKEN
            assert received.headers["authorization"] == f"Bearer {CREDENTIALS}"
        # At least once: a repeat carries the same id, so a receiver can drop it.
        ids = {r.headers["webhook-id"] for r in receiver.delivered()}
        assert len(ids) == 2


async def test_a_task_waiting_for_input_is_pushed_and_then_its_end(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await asking_agent(api, "Which city?", "Booked for Lisbon.")
    async with watched_task(http, binding, agent) as (receiver, client, task):
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED

        await _until_pushed(receiver, "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", what="its wait")
        assert (await _answered(client, task, "Lisbon")).status.state == State.TASK_STATE_COMPLETED
        await _until_pushed(receiver, "TASK_STATE_COMPLETED", what="the task's end")
        assert all(r.headers["x-a2a-notification-token"] == TOKEN for r in receiver.delivered())


async def test_a_task_cancelled_while_it_runs_is_pushed_canceled(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(mock_responses=[{"content": "part " * 2000, "delay_seconds": 0.05}])
    card = await fetch_card(http, agent)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False, polling=True) as client,
    ):
        task = (await anext(client.send_message(send_request("go")))).task
        assert task.status.state == State.TASK_STATE_WORKING
        await client.create_task_push_notification_config(_config(task.id, receiver.url, "w"))

        async def working() -> bool:
            return await api.status(agent) == "working"

        await eventually(working, what="the run under way")
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == State.TASK_STATE_CANCELED

        await _until_pushed(receiver, "TASK_STATE_CANCELED", what="the task's cancel")
        # Its one end, cancelled, not failed (a config set on a running task is told what follows).
        assert _states(receiver) == ["TASK_STATE_CANCELED"]


async def test_a_waiting_task_cancelled_is_pushed_canceled(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await asking_agent(api, "Which city?", "Booked.")
    async with watched_task(http, binding, agent) as (receiver, client, task):
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == State.TASK_STATE_CANCELED

        # Its end is recorded by the executor that takes the cancelled run, then closes it.
        states = ("TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_CANCELED")
        await _until_pushed(receiver, *states, what="the waiting task's cancel")
        assert sorted(_states(receiver)) == [
            "TASK_STATE_CANCELED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
        ]


async def test_a_task_waiting_on_its_workers_question_is_pushed_input_required_once(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    _, coordinator = await asking_worker_and_coordinator(api, "Which city?", "Lisbon it is.")
    async with watched_task(http, binding, coordinator) as (receiver, client, task):
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED

        await _until_pushed(receiver, "TASK_STATE_INPUT_REQUIRED", what="its wait on its worker's question")
        assert (await _answered(client, task, "Lisbon")).status.state == State.TASK_STATE_COMPLETED
        await _until_pushed(receiver, "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", what="the task's end")
        # Once: the top task's config, not the worker's run, is told; each state a single delivery.
        assert sorted(_states(receiver)) == [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
        ]
        assert {json.loads(r.body)["statusUpdate"]["taskId"] for r in receiver.delivered()} == {task.id}
