"""Generates the Python stubs from protos/ into src/ (or into --out, for the drift check).

Usage: python scripts/gen_protos.py [--out DIR] [--check]

--check generates into a temporary directory and fails when the result differs from src/, so CI
catches protos edited without regenerating.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
SRC = ROOT / "src"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def generate(out: Path) -> list[Path]:
    files = sorted(PROTOS.rglob("*.proto"))
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
        for package in [relative, *relative.parents][:-1]:
            (out / package / "__init__.py").touch()
        generated.extend(package_dir.glob(f"{proto.stem}_pb2*"))
    return generated


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.relative_to(tmp) for p in generate(Path(tmp))}
        committed = {
            p.relative_to(SRC)
            for p in SRC.rglob("*")
            if p.name.endswith(GENERATED_SUFFIXES) and "/v1/" in str(p.relative_to(SRC)) + "/"
        }
        drift = sorted(str(p) for p in fresh ^ committed)
        drift += sorted(
            str(p) for p in fresh & committed if not filecmp.cmp(Path(tmp) / p, SRC / p, shallow=False)
        )
    if drift:
        print("generated code drifted from protos/; run `make protos`:", *drift, sep="\n  ")
        return 1
    print(f"generated code matches protos/ ({len(fresh)} files)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when src/ differs from protos/")
    options = parser.parse_args()
    if options.check:
        return check()
    generate(SRC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
