"""The console's usage page, as a user meets it: `agentmesh up` with a price for the scripted
model, two agents that each answered a chat, and a real headless Chromium that opens the project's
usage — a bar chart of the last 30 days drawn as inline SVG, a bar today stacked by agent, the
agents' totals under it — then groups it by model and shows cost instead of tokens."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.e2e.browser import ConsolePage, browser_binaries, console_page
from tests.e2e.harness import agentmesh_up
from tests.e2e.test_console import ROOT
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD
from tests.polling import eventually
from tests.ports import free_loopback_ports

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

# $1,000 per million tokens: a call of 100 tokens costs $0.10.
PRICES = {"mock": {"input_per_million_tokens": 1000.0, "output_per_million_tokens": 1000.0}}


def answers(input_tokens: int) -> list[dict]:
    return [{"content": "Done.", "usage": {"input_tokens": input_tokens, "output_tokens": 0}}]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mesh(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, str]]:
    """`agentmesh up`, a project whose agents `writer` and `reviewer` used 300 and 100 tokens: the
    gateway's URL and the project's id."""
    tmp_path = tmp_path_factory.mktemp("console-usage")
    http_port, grpc_port = free_loopback_ports(2)
    up = agentmesh_up(
        tmp_path,
        http_port=http_port,
        grpc_port=grpc_port,
        superuser=(SUPERUSER_EMAIL, SUPERUSER_PASSWORD),
        env={"AGENTMESH_EXECUTOR_MODEL_PRICES": json.dumps(PRICES)},
    )
    async with up:
        url = f"http://127.0.0.1:{http_port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            login = {"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD}
            token = (await http.post("/api/v1/auth/login", json=login)).json()["access_token"]
            http.headers["authorization"] = f"Bearer {token}"
            project = await _created(http, "/api/v1/projects", {"name": "Spend", "slug": "spend"})
            kind = await _created(
                http, "/api/v1/agent-types", {"name": "Scripted", "slug": "scripted", "primary_model": "mock"}
            )
            for name, tokens in (("writer", 300), ("reviewer", 100)):
                body = {
                    "agent_type_id": kind["id"],
                    "name": name,
                    "config": {"mock_responses": answers(tokens)},
                }
                await _created(http, f"/api/v1/projects/{project['id']}/agents", body)
                chat = {"model": f"spend/{name}", "messages": [{"role": "user", "content": "Go"}]}
                assert (await http.post("/v1/chat/completions", json=chat)).status_code == 200

            async def both_counted() -> bool:
                usage = await http.get(f"/api/v1/projects/{project['id']}/usage")
                return usage.json()["total"]["calls"] == 2

            await eventually(both_counted, what="both calls in the ledger")
            yield url, project["id"]
    assert up.returncode == 0, up.output()


async def _created(http: httpx.AsyncClient, path: str, body: dict) -> dict:
    response = await http.post(path, json=body)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def console(mesh: tuple[str, str], request: pytest.FixtureRequest) -> Iterator[ConsolePage]:
    # Screenshots beside the console test's, in a folder of their own (each module empties its own).
    artifacts = Path(os.environ.get("AGENTMESH_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "console-usage"
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    name = request.node.name.removeprefix("test_")
    with console_page(browser_binaries(), mesh[0], artifacts, name) as page:
        yield page


async def test_the_usage_page_charts_each_day_by_agent_then_by_model(console: ConsolePage) -> None:
    console.open()
    console.sign_in(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
    console.click('.project-card[data-slug="spend"]', "the project on the projects page")
    console.click('[data-action="usage"]', "the project's Usage button")

    chart = console.find('svg[data-chart="usage"]', "the usage chart")
    assert chart.get_attribute("aria-label") == "Tokens per day, last 30 days"
    assert len(console.all('svg[data-chart="usage"] g[data-day]')) == 30  # a slot a day, empty ones too
    today = console.all('svg[data-chart="usage"] rect[data-day]')
    assert sorted(bar.get_attribute("data-group") for bar in today) == ["reviewer", "writer"]
    assert len({bar.get_attribute("data-day") for bar in today}) == 1  # one bar today, stacked
    heights = {bar.get_attribute("data-group"): float(bar.get_attribute("height")) for bar in today}
    assert heights["writer"] == pytest.approx(3 * heights["reviewer"], rel=0.01)
    assert console.texts(".usage-table tbody td.mono") == ["writer", "reviewer"]  # most used first
    assert "2 calls · 400 tokens · $0.4000" in console.text("[data-total]")
    console.shot("usage-by-agent")

    console.click('a[data-by="model"]', "group by model")
    console.wait(lambda _: console.texts(".usage-table tbody td.mono") == ["mock"], "the groups by model")
    console.click('a[data-measure="cost"]', "show cost")
    console.find('svg[data-chart="usage"][aria-label^="Cost"]', "the cost chart")
    assert console.text(".usage-table tbody tr").endswith("$0.4000")
    console.shot("usage-by-model-cost")
