"""The migrations build exactly the schema the store's models describe (and the columns kept for
the previous release's services, `RETIRED_COLUMNS`), on both backends, and upgrading twice is a
no-op."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from agentmesh.registry.app import MIGRATIONS, VERSION_TABLE
from agentmesh.registry.tables import RETIRED_COLUMNS, Base
from agentmesh.runtime.database import create_engine, upgrade


async def test_migrations_match_the_models(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)

        def differences(connection):
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
            )
            return [
                change
                for change in compare_metadata(context, Base.metadata)
                if not (change[0] == "remove_column" and (change[2], change[3].name) in RETIRED_COLUMNS)
            ]

        def tables(connection):
            return set(inspect(connection).get_table_names())

        async with engine.connect() as connection:
            diff = await connection.run_sync(differences)
            names = await connection.run_sync(tables)
    finally:
        await engine.dispose()
    assert diff == []
    assert names == {*Base.metadata.tables, VERSION_TABLE}
