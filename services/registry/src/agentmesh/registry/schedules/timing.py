"""When a schedule fires, and what its message says: five-field cron expressions read in an IANA
time zone (cronsim, which keeps wall-clock times across daylight-saving changes), and the message
template's two placeholders."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

PLACEHOLDERS = ("{{scheduled_for}}", "{{now}}")


def time_zone(name: str) -> ZoneInfo | None:
    """The IANA time zone of that name, None when there is none."""
    if not name or name.startswith(("/", ".")) or ".." in name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def cron_problem(cron: str) -> str:
    """What is wrong with a cron expression ("" when nothing is): five fields, as cron has them."""
    if len(cron.split()) != 5:
        return "must have five fields: minute hour day-of-month month day-of-week"
    try:
        next(CronSim(cron, datetime(2000, 1, 1, tzinfo=UTC)))
    except (CronSimError, StopIteration) as error:
        return f"is not a cron expression: {error}"
    return ""


def next_fire_at(cron: str, zone: str, *, after: datetime) -> datetime:
    """The first due time strictly after `after`, in UTC."""
    local = after.astimezone(ZoneInfo(zone))
    return next(CronSim(cron, local)).astimezone(UTC)


def render(template: str, zone: str, *, scheduled_for: datetime, now: datetime) -> str:
    """The message with its placeholders filled in, as ISO 8601 times in the schedule's zone."""
    tz = ZoneInfo(zone)
    return template.replace("{{scheduled_for}}", scheduled_for.astimezone(tz).isoformat()).replace(
        "{{now}}", now.astimezone(tz).isoformat()
    )
