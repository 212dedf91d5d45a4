"""The web console at `/`, as a user meets it: `agentmesh up`, the coordinator/worker example
applied with `agentmesh apply`, and a real headless Chromium that signs in, browses projects,
agents and sessions, chats with the coordinator and watches the worker's steps appear live, nested
in the delegation, then the trace waterfall and the event log; pauses, resumes and terminates
agents; shows an agent's versions, rolls it back and moves its sessions; and answers what an agent
asks a person, on the Requests page and in the chat. Screenshots
of every step are kept in an artifact folder whose path is printed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
import yaml

from tests.e2e.browser import ConsolePage, browser_binaries, console_page
from tests.e2e.harness import agentmesh_up, process_environment
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD
from tests.ports import free_loopback_ports

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coordinator-worker.yaml"
STATIC = ROOT / "services" / "gateway" / "src" / "agentmesh" / "gateway" / "console" / "static"
TOKENS_KEY = "agentmesh.console.tokens"  # where the console keeps its tokens (sessionStorage)
# The worker thinks this long after its tool call, so that the console is seen mid-run.
WORKER_THINKS_SECONDS = 1.5
ANSWER = "Done: the worker processed task 42"
MARKUP = '<b>Process task 42</b><img src="x" onerror="window.injected = 1">'
QUESTION = "Which city should I book?"
BOOKED = "Booked: two nights by the river."
DELEGATION_KINDS = [
    "user_message",
    "delegation_request",
    "task_delegation_received",
    "tool_call",
    "tool_result",
    "agent_response",
    "delegation_response",
    "agent_response",
]


@dataclass(frozen=True)
class Mesh:
    """`agentmesh up` with the example applied: the gateway's URL and a signed-in REST client."""

    url: str
    http: httpx.AsyncClient
    project_id: str

    async def agent(self, name: str) -> dict:
        agents = (await self.http.get(f"/api/v1/projects/{self.project_id}/agents")).json()["data"]
        return next(agent for agent in agents if agent["name"] == name)

    async def change(self, name: str, verb: str) -> None:
        """Pauses or resumes an agent through the REST API, as another client would."""
        agent_id = (await self.agent(name))["id"]
        response = await self.http.post(f"/api/v1/projects/{self.project_id}/agents/{agent_id}/{verb}")
        assert response.status_code == 200, response.text

    async def events(self, session_id: str) -> list[dict]:
        path = f"/api/v1/projects/{self.project_id}/sessions/{session_id}/events"
        return (await self.http.get(path)).json()["events"]


def example_with_a_slow_worker(path: Path) -> Path:
    """The shipped example, its worker slower to answer after its tool call, plus a spare worker
    (`scratch`) to terminate."""
    document = yaml.safe_load(EXAMPLE.read_text())
    project = document["projects"][0]
    worker = next(agent for agent in project["agents"] if agent["name"] == "worker")
    worker["config"]["mock_responses"][-1]["delay_seconds"] = WORKER_THINKS_SECONDS
    project["agents"].append({"name": "scratch", "type": "demo-worker"})
    # An agent that asks a person which city, then books.
    document["agent_types"].append(
        {"name": "Demo planner", "slug": "demo-planner", "primary_model": "mock", "tools": ["ask_user"]}
    )
    asks = {"content": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": QUESTION}}]}
    project["agents"].append(
        {"name": "planner", "type": "demo-planner", "config": {"mock_responses": [asks, BOOKED]}}
    )
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module")
def chromium() -> tuple[str, str]:
    return browser_binaries()


@pytest.fixture(scope="module")
def artifacts(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Where screenshots go: `test-artifacts/console/` in the repository (ignored by git), or
    the folder AGENTMESH_TEST_ARTIFACTS names; emptied first, printed at the end."""
    folder = Path(os.environ.get("AGENTMESH_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "console"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield folder
    if any(folder.iterdir()):
        # Past output capturing, so that the path shows whether the tests passed or not.
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"\nconsole screenshots: {folder}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mesh(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    tmp_path = tmp_path_factory.mktemp("console-mesh")
    http_port, grpc_port = free_loopback_ports(2)
    up = agentmesh_up(
        tmp_path, http_port=http_port, grpc_port=grpc_port, superuser=(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
    )
    async with up:
        apply = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "agentmesh.cli.main", "apply"),
            *("-f", str(example_with_a_slow_worker(tmp_path / "example.yaml"))),
            *("--gateway", f"127.0.0.1:{grpc_port}"),
            env=process_environment(
                {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(apply.communicate(), timeout=60)
        assert apply.returncode == 0, output.decode()
        url = f"http://127.0.0.1:{http_port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            login = {"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD}
            token = (await http.post("/api/v1/auth/login", json=login)).json()["access_token"]
            http.headers["authorization"] = f"Bearer {token}"
            projects = (await http.get("/api/v1/projects")).json()["data"]
            project_id = next(project["id"] for project in projects if project["slug"] == "demo")
            yield Mesh(url=url, http=http, project_id=project_id)
    assert up.returncode == 0, up.output()


@pytest.fixture
def console(
    chromium: tuple[str, str], mesh: Mesh, artifacts: Path, request: pytest.FixtureRequest
) -> Iterator[ConsolePage]:
    with console_page(chromium, mesh.url, artifacts, request.node.name.removeprefix("test_")) as page:
        yield page


async def signed_in(console: ConsolePage) -> None:
    console.open()
    console.sign_in(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
    console.find(".project-card", "the projects page")


# --- the page and its assets --------------------------------------------------------------------


async def test_the_console_and_its_assets_are_served_from_the_package(mesh: Mesh) -> None:
    async with httpx.AsyncClient(base_url=mesh.url) as http:
        page = await http.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        # Everything from the gateway itself: no CDN, so it works offline.
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert (await http.head("/")).status_code == 200
        referenced = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        modules = {
            name
            for path in STATIC.glob("*.js")
            for name in re.findall(r'from "\./([^"]+)"', path.read_text())
        }
        assert modules and referenced
        for asset in [*referenced, *(f"console/{name}" for name in modules)]:
            assert asset.startswith("console/"), asset
            response = await http.get(f"/{asset}")
            assert response.status_code == 200, asset
        assert (await http.get("/console/app.js")).headers["content-type"].startswith("text/javascript")
        for name in ("nope.js", "..%2Fpolicy.py", "index.html"):
            missing = await http.get(f"/console/{name}")
            assert missing.status_code == 404, name
            assert "not found" in missing.json()["detail"].lower()
    for path in STATIC.iterdir():
        text = path.read_text()
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), f"{path.name} names another site"


# --- signing in, chatting, the steps, the waterfall, the event log ------------------------------


async def test_sign_in_chat_and_watch_every_step_of_the_delegation_live(
    console: ConsolePage, mesh: Mesh
) -> None:
    console.open()
    console.sign_in(SUPERUSER_EMAIL, "not-the-password")
    assert "Wrong e-mail or password" in console.text(".login-card .alert")
    console.shot("sign-in-refused")
    console.sign_in(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
    console.click('.project-card[data-slug="demo"]', "the demo project")

    assert console.text('tr[data-agent="coordinator"] .badge', "the coordinator's row") == "idle"
    console.shot("project")
    console.click('tr[data-agent="coordinator"] [data-action="chat"]')

    console.find("textarea[name=message]").send_keys("Process task 42")
    console.click('[data-action="send"]')
    # Live: the worker's run shows up, still running, inside the coordinator's delegation while
    # the chat is still going (the worker thinks for seconds after its tool call).
    running_worker = '.live-steps .run[data-agent="coordinator"] .nested .run-running[data-agent="worker"]'
    console.find(f"{running_worker} .step-tool_call", "the worker's tool call while it runs")
    assert not console.find('[data-action="send"]').is_enabled(), "the chat had already ended"
    console.wait(lambda _: console.text(".agent-status .badge") == "working", "the coordinator working")
    console.shot("chat-live")

    console.wait(
        lambda driver: any(
            ANSWER in element.text
            for element in driver.find_elements(
                "css selector", ".message-assistant:not(.streaming):not(.message-error)"
            )
        ),
        "the coordinator's answer",
    )
    worker = '.run[data-agent="coordinator"] .nested .run-completed[data-agent="worker"]'
    console.find(worker, "the worker done")
    assert console.text(f"{worker} .step-tool_call .tool-name") == "get_current_time"
    console.find(f'{worker} .step-tool_call .answer[data-kind="tool_result"]', "the tool's result")
    delegated = '.run[data-agent="coordinator"] > .run-events > .step-delegation_request > .answer'
    assert "completed" in console.text(delegated)
    console.shot("chat-steps")

    # The waterfall: the coordinator's run, the delegation, the worker's run and its tool call,
    # the worker inside the coordinator's time.
    console.click('[data-tab="waterfall"]')
    console.find(".waterfall")
    # Read in one script: the view may redraw between two reads.
    rows = console.driver.execute_script(
        """return [...document.querySelectorAll('.wf-row[data-kind]')].map((row) => {
             const bar = row.querySelector('.wf-bar').getBoundingClientRect();
             const label = row.querySelector('.wf-name').textContent;
             return {kind: row.dataset.kind, label, left: bar.left, right: bar.right};
           });"""
    )
    assert [(row["kind"], row["label"]) for row in rows] == [
        ("run", "coordinator"),
        ("delegation", "→ worker"),
        ("run", "worker"),
        ("tool", "⚙ get_current_time"),
    ]
    coordinator, delegation, worker_run, tool = rows
    assert coordinator["left"] <= delegation["left"] <= worker_run["left"] <= tool["left"]
    assert tool["right"] <= worker_run["right"] <= delegation["right"] + 1 <= coordinator["right"] + 2
    assert tool["right"] > tool["left"]
    console.shot("waterfall")

    # The event log is the memory service's log, seq for seq.
    console.click('[data-tab="events"]')
    console.find(".event-log")
    session_id = console.text(".session-id a").removeprefix("session ")
    stored = await mesh.events(session_id)
    assert [event["event_type"] for event in stored] == DELEGATION_KINDS
    shown = console.driver.execute_script(
        "return [...document.querySelectorAll('.event-row')].map((r) => [r.dataset.seq, r.dataset.kind])"
    )
    assert shown == [[str(event["seq"]), event["event_type"]] for event in stored]
    console.click(f'.event-row[data-seq="{stored[3]["seq"]}"]')
    assert stored[3]["id"] in console.text(".event-detail pre")
    console.shot("event-log")


async def test_browse_sessions_and_continue_one_in_chat(console: ConsolePage, mesh: Mesh) -> None:
    # A session begun elsewhere, through the OpenAI-compatible API.
    chat = {"model": "demo/coordinator", "messages": [{"role": "user", "content": MARKUP}]}
    reply = await mesh.http.post("/v1/chat/completions", json=chat, headers={"X-Session-Id": "from-the-api"})
    assert reply.status_code == 200, reply.text

    await signed_in(console)
    console.click(f'.side-list a[data-project="{mesh.project_id}"]', "the project in the side bar")
    console.click('tr[data-session="from-the-api"]', "the session in the list")
    worker = '.session-panel .run[data-agent="coordinator"] .nested .run[data-agent="worker"]'
    assert console.text(f"{worker} .tool-name") == "get_current_time"
    # What users and agents write is shown as text, never run as markup.
    assert console.text(".session-panel .step-user_message .step-body") == MARKUP
    assert console.all(".session-panel img, .session-panel b") == []
    assert console.driver.execute_script("return window.injected === undefined")
    console.shot("session")
    console.click('[data-tab="waterfall"]')
    assert len(console.all('.wf-row[data-kind="run"]')) == 2
    console.shot("session-waterfall")

    console.click("a.button.primary", "continue in chat")
    console.find(".message-user", "the earlier conversation")
    assert console.texts(".message-user .bubble-text") == [MARKUP]
    assert ANSWER in console.texts(".message-assistant .bubble-text")[0]
    assert console.text(".session-id a") == "session from-the-api"
    console.shot("continued")


async def test_fork_a_session_at_an_event_of_its_log(console: ConsolePage, mesh: Mesh) -> None:
    chat = {"model": "demo/coordinator", "messages": [{"role": "user", "content": "Process task 7"}]}
    reply = await mesh.http.post("/v1/chat/completions", json=chat, headers={"X-Session-Id": "to-fork"})
    assert reply.status_code == 200, reply.text

    await signed_in(console)
    console.open(f"#/projects/{mesh.project_id}/sessions/to-fork")
    console.click('[data-tab="events"]')
    console.click('.event-row[data-seq="1"]', "the first event")
    console.click('[data-action="fork"][data-seq="1"]', "fork here")
    console.wait(lambda driver: "/sessions/to-fork" not in driver.current_url, "the fork opened")
    fork_id = console.driver.current_url.rsplit("/sessions/", 1)[1]
    console.find(".session-panel .step-user_message", "the inherited message in the fork")
    console.shot("forked")
    events = await mesh.events(fork_id)
    assert [e["seq"] for e in events] == [1] and events[0]["content"] == "Process task 7"


async def test_an_agents_versions_their_changes_a_rollback_and_moving_all_its_sessions(
    console: ConsolePage, mesh: Mesh
) -> None:
    types = (await mesh.http.get("/api/v1/agent-types", params={"page_size": 200})).json()["data"]
    body = {"name": "versioned", "config": {"mock_responses": ["one"]}}
    body["agent_type_id"] = next(t["id"] for t in types if t["slug"] == "demo-worker")
    agents = f"/api/v1/projects/{mesh.project_id}/agents"
    agent = f"{agents}/{(await mesh.http.post(agents, json=body)).json()['id']}"
    chat = {"model": "demo/versioned", "messages": [{"role": "user", "content": "which?"}]}
    assert (await mesh.http.post("/v1/chat/completions", json=chat)).status_code == 200
    assert (await mesh.http.patch(agent, json={"config": {"mock_responses": ["two"]}})).status_code == 200

    await signed_in(console)
    console.open(f"#/projects/{mesh.project_id}")
    console.click('#app tr[data-agent="versioned"] [data-action="versions"]', "the agent's versions")
    assert "config.mock_responses" in console.text('tr[data-version="2"] .changes', "what version 2 changed")
    console.shot("versions")
    console.click('[data-action="move-all"]', "move all sessions to latest")
    console.wait(lambda _: "Moved 1 of 1 sessions to version 2" in console.text(".alert"), "the answer")
    console.click('tr[data-version="1"] [data-action="restore"]', "roll back to version 1")
    console.find('tr[data-version="3"]', "the rollback's new version")
    console.shot("rolled-back")
    latest = (await mesh.http.get(f"{agent}/versions")).json()["data"][0]
    assert latest["number"] == 3 and latest["config"]["mock_responses"] == ["one"]


# --- a person in the loop ----------------------------------------------------------------------


async def test_what_an_agent_asks_is_answered_on_the_requests_page_and_in_the_chat(
    console: ConsolePage, mesh: Mesh
) -> None:
    # Asked in a chat elsewhere (the OpenAI-compatible API): the run waits for a person.
    chat = {"model": "demo/planner", "messages": [{"role": "user", "content": "Book me a trip."}]}
    reply = await mesh.http.post(
        "/v1/chat/completions", json=chat, headers={"X-Session-Id": "asked-elsewhere"}
    )
    assert reply.status_code == 200, reply.text
    assert QUESTION in reply.json()["choices"][0]["message"]["content"]

    await signed_in(console)
    console.open(f"#/projects/{mesh.project_id}")
    assert console.text('[data-action="requests"] .count', "the count of waiting requests") == "1"
    console.click('[data-action="requests"]')
    card = '.request[data-kind="question"]'
    assert console.text(f"{card} .request-question", "the question on the Requests page") == QUESTION
    assert console.text(f"{card} .request-head strong") == "planner"
    console.shot("requests")
    console.find(f"{card} textarea[name=answer]").send_keys("Lisbon")
    console.click(f'{card} [data-action="answer"]')
    outcome = f'{card}[data-outcome="answered"] .request-status'
    assert BOOKED in console.text(outcome, "the resumed run's answer on the Requests page")
    assert "Answered “Lisbon”" in console.text(outcome)
    console.shot("requests-answered")
    received = [e for e in await mesh.events("asked-elsewhere") if e["event_type"] == "input_received"]
    assert [json.loads(e["content"])["answer"] for e in received] == ["Lisbon"]

    # Asked in the console's own chat: the request is a card in the conversation.
    planner = await mesh.agent("planner")
    console.open(f"#/projects/{mesh.project_id}/agents/{planner['id']}/chat")
    console.find("textarea[name=message]").send_keys("Book me another trip.")
    console.click('[data-action="send"]')
    card = f".messages .message-request {card}"
    assert console.text(f"{card} .request-question", "the question in the chat") == QUESTION
    console.find(".live-steps .step-input_requested", "the request among the steps")
    console.shot("chat-asks")
    console.find(f"{card} textarea[name=answer]").send_keys("Porto\n")
    console.wait(
        lambda _: BOOKED in console.texts(".message-assistant .bubble-text")[-1],
        "the resumed run's answer in the conversation",
    )
    console.find(".live-steps .step-input_received", "the answer among the steps")
    console.shot("chat-answered")
    pending = await mesh.http.get(f"/api/v1/projects/{mesh.project_id}/input-requests")
    assert pending.json()["data"] == []


# --- the lifecycle ----------------------------------------------------------------------------


async def test_pause_resume_and_terminate_agents_with_live_status(console: ConsolePage, mesh: Mesh) -> None:
    await signed_in(console)
    console.open(f"#/projects/{mesh.project_id}")
    row = '#app tr[data-agent="worker"]'

    console.click(f'{row}[data-status="idle"] [data-action="pause"]', "the worker's pause button")
    console.find(f'{row}[data-status="paused"]', "the worker paused")
    assert (await mesh.agent("worker"))["status"] == "paused"
    console.shot("paused")

    # A paused agent refuses a chat, and the console says why.
    console.click(f'{row} [data-action="chat"]')
    console.find("textarea[name=message]").send_keys("hello")
    console.click('[data-action="send"]')
    assert "paused" in console.text(".message-error", "the refusal")
    console.shot("chat-refused")
    console.driver.back()

    console.click(f'{row}[data-status="paused"] [data-action="resume"]', "the worker's resume button")
    console.find(f'{row}[data-status="idle"]', "the worker idle again")
    assert (await mesh.agent("worker"))["status"] == "idle"

    # Live: a change made elsewhere shows without a reload.
    await mesh.change("worker", "pause")
    console.find(f'{row}[data-status="paused"]', "the pause made through the API")
    await mesh.change("worker", "resume")
    console.find(f'{row}[data-status="idle"]', "the resume made through the API")

    scratch = '#app tr[data-agent="scratch"]'
    console.click(f'{scratch} [data-action="terminate"]')
    assert console.text(f'{scratch} [data-action="terminate"]') == "Confirm"
    console.shot("terminate-confirm")
    console.click(f'{scratch} [data-action="terminate"]')
    console.find(f'{scratch}[data-status="terminated"]', "scratch terminated")
    assert [e.get_attribute("data-action") for e in console.all(f"{scratch} [data-action]")] == ["versions"]
    assert (await mesh.agent("scratch"))["status"] == "terminated"
    console.shot("terminated")


async def test_an_expired_token_is_refreshed_and_signing_out_returns_to_the_sign_in_page(
    console: ConsolePage,
) -> None:
    await signed_in(console)
    # An access token that no longer works: the console refreshes it and carries on.
    console.driver.execute_script(
        "const tokens = JSON.parse(sessionStorage.getItem(arguments[0]));"
        "tokens.access_token = 'expired';"
        "sessionStorage.setItem(arguments[0], JSON.stringify(tokens));",
        TOKENS_KEY,
    )
    console.driver.refresh()
    console.find(".project-card", "the projects after refreshing the token")
    assert console.driver.execute_script(
        "return JSON.parse(sessionStorage.getItem(arguments[0])).access_token !== 'expired'", TOKENS_KEY
    )
    assert SUPERUSER_EMAIL in console.text(".user")
    console.click('[data-action="sign-out"]')
    console.find("input[name=email]", "the sign-in form")
    console.open("#/projects")
    console.find("input[name=email]", "the sign-in form after a reload")


# --- without a browser --------------------------------------------------------------------------


async def test_without_chromium_the_browser_tests_skip_and_under_ci_they_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium-driver"):
        browser_binaries()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI=true"):
        browser_binaries()
