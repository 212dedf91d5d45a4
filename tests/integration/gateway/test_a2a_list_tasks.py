"""ListTasks on every binding, through the official a2a-sdk client: its filters, its paging and
its refusals (the spec's InvalidParamsError naming the field; never an internal error)."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors

from tests.integration.gateway.a2a_client import BINDINGS, agent_client, send_request
from tests.integration.gateway.support import Api
from tests.polling import eventually

State = a2a_pb2.TaskState
pytestmark = pytest.mark.parametrize("binding", BINDINGS)


async def test_a_context_nobody_used_lists_no_tasks(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with agent_client(api, http, binding, answers=["hi"]) as (_agent, client):
        for context_id in ("never-used-context", "not a session name!"):
            listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=context_id))
            assert list(listed.tasks) == [] and listed.total_size == 0 and not listed.next_page_token
        # The agent answers on: a context that did not exist takes a first task.
        request = send_request("hi")
        request.message.context_id = "never-used-context"
        [sent] = [r async for r in client.send_message(request)]
        listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id="never-used-context"))
        assert [t.id for t in listed.tasks] == [sent.task.id]


async def test_bad_list_parameters_are_refused_naming_the_field(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with agent_client(api, http, binding, answers=["hi"]) as (_agent, client):
        for page_size in (-1, 0, 101):
            with pytest.raises(a2a_errors.InvalidParamsError, match=rf"page_size.*got {page_size}"):
                await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=page_size))
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"history_length.*got -1"):
            await client.list_tasks(a2a_pb2.ListTasksRequest(history_length=-1))
        # A state number no TaskState has (each binding carries it as it can: gRPC as the
        # number, JSON as the number's name or the number).
        with pytest.raises(a2a_errors.InvalidParamsError, match="status"):
            await client.list_tasks(a2a_pb2.ListTasksRequest(status=99))  # type: ignore[arg-type]
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"^history_length.*got -1"):
            await client.get_task(a2a_pb2.GetTaskRequest(id="no-run~no-session", history_length=-1))
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"configuration.history_length.*got -2"):
            [r async for r in client.send_message(send_request("hi", history_length=-2))]
        # The limits themselves are served.
        for page_size in (1, 100):
            listed = await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=page_size, history_length=0))
            assert listed.page_size == page_size


async def test_an_unknown_status_name_is_refused_on_the_http_bindings(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    """What the SDK client cannot send (it writes states from the enum): a state name no TaskState
    has. gRPC carries the state as its number (the test above)."""
    if binding == "GRPC":
        pytest.skip("gRPC carries a state's number, never its name")
    agent = await api.agent(mock_responses=["hi"])
    headers = {**agent.owner.headers, "A2A-Version": "1.0"}
    if binding == "JSONRPC":
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "TASK_STATE_RUNNING"}}
        answer = await http.post(f"{agent.base}/a2a/jsonrpc", json=body, headers=headers)
        error = answer.json()["error"]
        assert error["code"] == -32602 and error["message"].startswith("status: 'TASK_STATE_RUNNING'")
    else:
        answer = await http.get(
            f"{agent.base}/a2a/rest/tasks", params={"status": "TASK_STATE_RUNNING"}, headers=headers
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"].startswith("status: 'TASK_STATE_RUNNING'")
    served = await http.get(
        f"{agent.base}/a2a/rest/tasks", params={"status": "TASK_STATE_COMPLETED"}, headers=headers
    )
    assert served.status_code == 200, served.text


async def test_the_status_filters_apply_before_paging(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    slow = {"content": "part " * 200, "delay_seconds": 0.3}  # 16 chunks: about 5 s a task
    async with agent_client(api, http, binding, answers=[slow]) as (_agent, client):

        async def start(context_id: str) -> a2a_pb2.Task:
            request = send_request("go", return_immediately=True)
            request.message.context_id = context_id
            [started] = [r async for r in client.send_message(request)]
            return started.task

        done = await start("status-done")
        cancelled = await client.cancel_task(
            a2a_pb2.CancelTaskRequest(id=(await start("status-cancelled")).id)
        )
        assert cancelled.status.state == State.TASK_STATE_CANCELED

        async def completed() -> bool:
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=done.id))
            return task.status.state == State.TASK_STATE_COMPLETED

        await eventually(completed, timeout=30, what="the first task completing")
        working = await start("status-working")

        async def listed(**filters: object) -> tuple[list[str], int, str]:
            page = await client.list_tasks(a2a_pb2.ListTasksRequest(**filters))
            return [t.id for t in page.tasks], page.total_size, page.next_page_token

        # One a page: the filter picks before the page is cut, so the one match is on page one.
        assert await listed(status=State.TASK_STATE_COMPLETED, page_size=1) == ([done.id], 1, "")
        assert await listed(status=State.TASK_STATE_CANCELED, page_size=1) == ([cancelled.id], 1, "")
        assert await listed(status=State.TASK_STATE_WORKING, page_size=1) == ([working.id], 1, "")
        assert await listed(status=State.TASK_STATE_FAILED) == ([], 0, "")
        assert await listed(status=State.TASK_STATE_INPUT_REQUIRED) == ([], 0, "")
        ids, total, token = await listed(page_size=2)
        assert ids == [working.id, cancelled.id] and total == 3 and token

        # statusTimestampAfter: the tasks whose status changed at or after the time: the slow
        # one's end came after the cancelled one's, and the working one started after both.
        since = (await client.get_task(a2a_pb2.GetTaskRequest(id=done.id))).status.timestamp
        assert (await listed(status_timestamp_after=since))[:2] == ([working.id, done.id], 2)
        working_since = await listed(status_timestamp_after=since, status=State.TASK_STATE_WORKING)
        assert working_since == ([working.id], 1, "")
        await client.cancel_task(a2a_pb2.CancelTaskRequest(id=working.id))  # leave nothing running
