"""Column types the registry's tables share."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa


class UtcDateTime(sa.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps them as naive UTC text)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
