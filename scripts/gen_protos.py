"""Generates the Python stubs from protos/ into the workspace member that owns each package:
`agentmesh.<service>.v1` (public) and `agentmesh.internal.<service>.v1` (internal) into
services/<service>/src/, `agentmesh.common.v1` into services/runtime/src/. `agentmesh.internal` is,
like `agentmesh`, a PEP 420 namespace shared by the members: no __init__.py there.

Usage: python scripts/gen_protos.py [--check]

--check generates into a temporary directory and fails when the result differs from what is
committed, so CI catches protos edited without regenerating.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
SERVICES = ROOT / "services"
# Proto packages that belong to a member other than the one named like them.
OWNER = {"common": "runtime"}
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def member_src(package: Path) -> Path:
    """Where the stubs of `agentmesh/<name>/v1` or `agentmesh/internal/<name>/v1` go: the owning
    member's src/."""
    name = package.parts[2] if package.parts[1] == "internal" else package.parts[1]
    return SERVICES / OWNER.get(name, name) / "src"


def generate(out: Path) -> list[Path]:
    """Runs protoc over every proto into `out` (one tree, as protoc writes it)."""
    # Only agentmesh's own protos: the vendored google/ ones are there for imports, and their
    # Python modules come from googleapis-common-protos.
    files = sorted((PROTOS / "agentmesh").rglob("*.proto"))
    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *map(str, files),
    ]
    # protoc finds the mypy plugins on PATH; they sit beside this interpreter in a virtualenv.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = []
    for proto in files:
        relative = proto.parent.relative_to(PROTOS)
        package_dir = out / relative
        # `agentmesh` is a PEP 420 namespace shared by every member: no __init__.py there.
        for package in [relative, *relative.parents][:-2]:
            (out / package / "__init__.py").touch()
        generated.extend(package_dir.glob(f"{proto.stem}_pb2*"))
    return generated


def committed() -> dict[Path, Path]:
    """Every committed stub, by its path relative to its member's src/."""
    return {
        path.relative_to(src): path
        for src in SERVICES.glob("*/src")
        for path in src.rglob("*")
        if path.name.endswith(GENERATED_SUFFIXES) and "v1" in path.relative_to(src).parts
    }


def install(tmp: Path, generated: list[Path]) -> None:
    """Copies freshly generated stubs (and their package markers) into their members."""
    for path in generated:
        relative = path.relative_to(tmp)
        target = member_src(relative) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        (target.parent / "__init__.py").touch()
        (target.parent.parent / "__init__.py").touch()


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.relative_to(tmp) for p in generate(Path(tmp))}
        existing = committed()
        drift = sorted(str(p) for p in fresh ^ existing.keys())
        drift += sorted(
            str(p)
            for p in fresh & existing.keys()
            if not filecmp.cmp(Path(tmp) / p, existing[p], shallow=False)
        )
    if drift:
        print("generated code drifted from protos/; run `make protos`:", *drift, sep="\n  ")
        return 1
    print(f"generated code matches protos/ ({len(fresh)} files)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail when the committed stubs differ from protos/"
    )
    options = parser.parse_args()
    if options.check:
        return check()
    with tempfile.TemporaryDirectory() as tmp:
        install(Path(tmp), generate(Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
