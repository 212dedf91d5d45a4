"""The executor starts without importing the model and MCP SDKs: they take seconds to import and
only agents with an OpenAI-compatible model or an MCP server need them."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_executor_leaves_openai_and_mcp_unimported() -> None:
    probe = (
        "import json, sys\n"
        "import agentmesh.executor.app\n"
        "print(json.dumps(sorted(m for m in ('openai', 'mcp') if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
