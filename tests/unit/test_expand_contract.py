"""Schema changes are expand/contract: a release's migrations only add what the previous release's
services can live with, so the two run side by side on one schema while an upgrade rolls
(tests/faults/test_upgrade.py runs them). In a migration newer than the previous release's schema
head, `upgrade()` may not drop or rename a table, column or constraint, change a column's type,
make a column NOT NULL, or add a NOT NULL column without a server default (the old services'
inserts do not name it). What a release stops reading is dropped in a later release's migration,
once no running service reads it: that contract step names the release it follows in its
docstring, `Contract after: X.Y.Z`, and is allowed only when X.Y.Z is a recorded release."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.releases import ROOT, previous_release, releases

MIGRATIONS = {
    "registry": ROOT / "services/registry/src/agentmesh/registry/migrations/versions",
    "memory": ROOT / "services/memory/src/agentmesh/memory/migrations/versions",
}
DESTRUCTIVE_CALLS = {"drop_column", "drop_table", "rename_table", "drop_constraint"}
DESTRUCTIVE_SQL = re.compile(
    r"\b(DROP\s+(TABLE|COLUMN|CONSTRAINT)|RENAME\s+(TO|COLUMN)|SET\s+NOT\s+NULL)\b", re.I
)
CONTRACT_AFTER = re.compile(r"Contract after:\s*(\S+)")


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _destructive_sql(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(DESTRUCTIVE_SQL.search(node.value))
    )


def _required(column: ast.expr) -> bool:
    """A new column the old services' inserts would violate: NOT NULL with no server default (a
    new table's columns are its own business: no old service writes it)."""
    if not (
        isinstance(column, ast.Call)
        and getattr(column.func, "attr", getattr(column.func, "id", "")) == "Column"
    ):
        return False
    keywords = _keywords(column)
    return _is_false(keywords.get("nullable")) and "server_default" not in keywords


def breaking_changes(source: str) -> list[str]:
    """What a migration's `upgrade()` does that the previous release's services could not live
    with (empty when it only expands the schema)."""
    module = ast.parse(source)
    docstring = ast.get_docstring(module) or ""
    contract = CONTRACT_AFTER.search(docstring)
    if contract and contract.group(1) in {release.version for release in releases()}:
        return []
    upgrade = next(
        (node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "upgrade"), None
    )
    found = []
    for node in ast.walk(upgrade) if upgrade else ():
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        keywords = _keywords(node)
        if name in DESTRUCTIVE_CALLS:
            found.append(f"line {node.lineno}: {name}")
        elif name == "alter_column" and (
            {"new_column_name", "type_"} & keywords.keys() or _is_false(keywords.get("nullable"))
        ):
            found.append(f"line {node.lineno}: alter_column renames, retypes or makes a column NOT NULL")
        elif name == "add_column" and any(_required(column) for column in node.args):
            found.append(f"line {node.lineno}: a NOT NULL column without a server default")
        elif name in ("execute", "text") and _destructive_sql(node.args[0] if node.args else None):
            found.append(f"line {node.lineno}: SQL that drops, renames or sets NOT NULL")
    return found


def _chain(directory: Path) -> list[tuple[str, Path]]:
    """The service's migrations in order: (revision, file)."""
    by_parent: dict[str | None, tuple[str, Path]] = {}
    for path in directory.glob("*.py"):
        values = {}
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            value = getattr(node, "value", None)
            for target in targets:
                if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
                    values[target.id] = value.value
        by_parent[values.get("down_revision")] = (values["revision"], path)
    chain, parent = [], None
    while parent in by_parent:
        revision, path = by_parent[parent]
        chain.append((revision, path))
        parent = revision
    assert len(chain) == len(by_parent), f"{directory}: the migrations do not form one chain"
    return chain


def newer_than_release(service: str) -> list[Path]:
    head = getattr(previous_release(), f"{service}_schema")
    chain = _chain(MIGRATIONS[service])
    revisions = [revision for revision, _ in chain]
    assert head in revisions, f"releases.toml names {service} schema {head}, which no migration is"
    return [path for _, path in chain[revisions.index(head) + 1 :]]


@pytest.mark.parametrize("service", sorted(MIGRATIONS))
def test_migrations_since_the_previous_release_only_expand_the_schema(service: str) -> None:
    for path in newer_than_release(service):
        assert breaking_changes(path.read_text()) == [], f"{path.name} breaks the previous release's services"


EXPANDING = """
def upgrade():
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("public", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table("schedules", sa.Column("id", sa.String(), primary_key=True))
def downgrade():
    op.drop_table("schedules")
"""


@pytest.mark.parametrize(
    ("upgrade", "what"),
    [
        ('    op.drop_column("agents", "status")', "drop_column"),
        ('    op.alter_column("agents", "name", new_column_name="title")', "renames"),
        ('    op.add_column("agents", sa.Column("x", sa.Text(), nullable=False))', "server default"),
        ('    op.execute("ALTER TABLE agents RENAME TO bots")', "SQL"),
    ],
)
def test_a_migration_that_drops_renames_or_requires_is_refused(upgrade: str, what: str) -> None:
    assert breaking_changes(EXPANDING) == []
    (found,) = breaking_changes(f"def upgrade():\n{upgrade}\n")
    assert what in found
    contracted = (
        f'"""Drops what 0.3.0 stopped reading.\n\nContract after: 0.3.0\n"""\ndef upgrade():\n{upgrade}\n'
    )
    assert breaking_changes(contracted) == []
    assert breaking_changes(contracted.replace("0.3.0", "9.9.9")) != []
