"""The releases `releases.toml` records, for the tests that hold this tree to its predecessor."""

from __future__ import annotations

import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Release:
    version: str
    date: str
    commit: str
    registry_schema: str
    memory_schema: str


def releases() -> list[Release]:
    """Every recorded release, oldest first."""
    document = tomllib.loads((ROOT / "releases.toml").read_text())
    return [Release(**entry) for entry in document["release"]]


def previous_release() -> Release:
    """The newest release: what this tree upgrades from."""
    return releases()[-1]


def release_code(release: Release, target: Path) -> Path | None:
    """The release's source tree extracted under `target` (its services' and CLI's code), or None
    when this clone does not hold its commit (a shallow clone)."""
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{release.commit}^{{commit}}"], cwd=ROOT, capture_output=True, check=False
    )
    if known.returncode != 0:
        return None
    archive = subprocess.run(
        ["git", "archive", "--format=tar", release.commit, "src", "services"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def python_path(code: Path) -> str:
    """PYTHONPATH that makes a process import the release's `agentmesh` packages before this
    tree's (installed editable, listed after PYTHONPATH on `sys.path`)."""
    sources = [code / "src", *sorted((code / "services").glob("*/src"))]
    return ":".join(str(path) for path in sources)
