"""The README's OpenAI examples ("Any OpenAI client") run as they are written, against the package's
mesh: only the address, the token and the model names are the test's own, so an example that goes
stale fails here."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai_client_tools import CALLS_WEATHER
from tests.readme import readme_blocks

_EXAMPLE_ADDRESS = "http://127.0.0.1:8080"
_EXAMPLE_MODEL = '"demo/coordinator"'


def openai_examples() -> list[str]:
    """The python blocks of the README's OpenAI section, in order."""
    return readme_blocks("### Any OpenAI client", "python")


async def test_the_readmes_openai_examples_run(mesh: Mesh, api: Api, once: None) -> None:
    chatty = await api.agent(mock_responses=[{"echo_prompt": True}])
    weather = await api.agent(
        chatty.owner, name="weather", mock_responses=[CALLS_WEATHER, {"echo_prompt": True}]
    )
    blocks = openai_examples()
    assert len(blocks) == 3, "the README's OpenAI section changed: update this test"
    # The last example calls the client's tool: its own agent's model calls it.
    models = [chatty.model, chatty.model, weather.model]
    code = "\n".join(
        block.replace(_EXAMPLE_ADDRESS, mesh.gateway.http.url)
        .replace('os.environ["TOKEN"]', repr(chatty.owner.token))
        .replace(_EXAMPLE_MODEL, repr(model))
        for block, model in zip(blocks, models, strict=True)
    )
    # Examples await at the top level, as a notebook does: run as one coroutine, in a thread of its
    # own, since the synchronous client would block the loop the mesh serves on.
    namespace: dict[str, Any] = {}
    exec(f"async def readme():\n{textwrap.indent(code, '    ')}\n    return locals()", namespace)
    ran = await asyncio.to_thread(lambda: asyncio.run(namespace["readme"]()))

    assert "Process task 42" in (ran["reply"].choices[0].message.content or "")
    assert "And task 43?" in ran["again"].final_output
    assert ran["called"].choices[0].finish_reason == "tool_calls"
    assert "18C, sunny" in (ran["answer"].choices[0].message.content or "")
