"""A2A push notifications through the gateway, with the official a2a-sdk client over each binding:
a task's configs are set, read, listed and deleted by who may read the task (never a stranger); a
bad or refused URL is the spec's invalid-params error naming the field, with nothing stored; and a
config given with the message that starts a task has the task's updates POSTed to a loopback
receiver (the mesh's egress allow-list permits loopback, as `--allow-loopback-egress` does) with
the client's token, through to completion. The card says it supports them."""

from __future__ import annotations

import json

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors

from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.support import Api, asking_agent
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
    card = await fetch_card(http, agent)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False) as client,
    ):
        request = send_request("book", task_push_notification_config=_config("", receiver.url, "w"))
        task = (await anext(client.send_message(request))).task
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED

        def states() -> set[str]:
            return {json.loads(r.body)["statusUpdate"]["status"]["state"] for r in receiver.delivered()}

        async def asked() -> bool:
            return states() == {"TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"}

        await eventually(asked, timeout=30, what="the task's wait for input pushed")
        answer = send_request("Lisbon")
        answer.message.task_id = task.id
        done = (await anext(client.send_message(answer))).task
        assert done.status.state == State.TASK_STATE_COMPLETED

        async def ended() -> bool:
            return "TASK_STATE_COMPLETED" in states()

        await eventually(ended, timeout=30, what="the task's end pushed")
        assert all(r.headers["x-a2a-notification-token"] == TOKEN for r in receiver.delivered())


def _states(receiver: Receiver) -> list[str]:
    """The task states pushed, one per delivery (a repeat of one carries the same webhook-id)."""
    unique = {r.headers["webhook-id"]: r for r in receiver.delivered()}
    return [json.loads(r.body)["statusUpdate"]["status"]["state"] for r in unique.values()]


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

        async def ended() -> bool:
            return "TASK_STATE_CANCELED" in _states(receiver)

        await eventually(ended, timeout=30, what="the task's cancel pushed")
        # Its one end, cancelled, not failed (a config set on a running task is told what follows).
        assert _states(receiver) == ["TASK_STATE_CANCELED"]


async def test_a_waiting_task_cancelled_is_pushed_canceled(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await asking_agent(api, "Which city?", "Booked.")
    card = await fetch_card(http, agent)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, agent.owner.token, streaming=False) as client,
    ):
        request = send_request("book", task_push_notification_config=_config("", receiver.url, "w"))
        task = (await anext(client.send_message(request))).task
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == State.TASK_STATE_CANCELED

        # Its end is recorded by the executor that takes the cancelled run, then closes it.
        async def ended() -> bool:
            return set(_states(receiver)) == {
                "TASK_STATE_WORKING",
                "TASK_STATE_INPUT_REQUIRED",
                "TASK_STATE_CANCELED",
            }

        await eventually(ended, timeout=30, what="the waiting task's cancel pushed")
        assert sorted(_states(receiver)) == [
            "TASK_STATE_CANCELED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
        ]


async def test_a_task_waiting_on_its_workers_question_is_pushed_input_required_once(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    worker = await asking_agent(api, "Which city?", "Lisbon it is.")
    delegation = {"name": "delegate", "arguments": {"agent": worker.name, "task": "pick a city"}}
    coordinator = await api.agent(
        worker.owner,
        name="coordinator",
        project={"id": worker.project_id, "slug": worker.project_slug},
        mock_responses=[{"content": "", "tool_calls": [delegation]}, "Coordinated."],
        network_access=[worker.name],
    )
    card = await fetch_card(http, coordinator)
    async with (
        webhook_receiver() as receiver,
        a2a_client(card, binding, coordinator.owner.token, streaming=False) as client,
    ):
        request = send_request("book", task_push_notification_config=_config("", receiver.url, "w"))
        task = (await anext(client.send_message(request))).task
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED

        async def asked() -> bool:
            return "TASK_STATE_INPUT_REQUIRED" in _states(receiver)

        await eventually(asked, timeout=30, what="the task's wait on its worker's question pushed")
        answer = send_request("Lisbon")
        answer.message.task_id = task.id
        done = (await anext(client.send_message(answer))).task
        assert done.status.state == State.TASK_STATE_COMPLETED

        async def ended() -> bool:
            return {"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} <= set(_states(receiver))

        await eventually(ended, timeout=30, what="the task's end pushed")
        # Once: the top task's config, not the worker's run, is told; each state a single delivery.
        assert sorted(_states(receiver)) == [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
        ]
        assert {json.loads(r.body)["statusUpdate"]["taskId"] for r in receiver.delivered()} == {task.id}
