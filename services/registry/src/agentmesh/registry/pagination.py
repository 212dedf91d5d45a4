"""The registry's List paging: `page_size` with either `page_token` or `page`.

Tokens are the runtime's page tokens, signed with a key derived from the registry's secret and
scoped to one list (which resource, whose view, which parent); their cursor is the sort key of the
last item served (`created_at`, `id`), so they page by keyset. `page` (1-based) is also accepted
for REST-style paging: the store turns it into the keyset boundary of page N (no OFFSET, and no
walking the pages before it; docs/architecture.md, Decisions).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, TypeVar

from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.models import Page, PageRequest, Slice
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.pagination import PageTokenCodec, clamp_page_size, cursor_datetime, cursor_str

_PURPOSE = "agentmesh.registry.page-token"


class PageTokens:
    """Turns a List call's paging fields into a PageRequest, and issues the next page's token."""

    def __init__(self, secret: str) -> None:
        self._codec = PageTokenCodec.from_secret(secret, purpose=_PURPOSE)

    def request(self, *, page_size: int, page_token: str, page: int, scope: str) -> PageRequest:
        """The PageRequest of a List call; INVALID_ARGUMENT for bad sizes, pages and tokens."""
        violations = []
        if page_size < 0:
            violations.append(FieldViolation("page_size", "must not be negative"))
        if page < 0:
            violations.append(FieldViolation("page", "must not be negative"))
        if page and page_token:
            violations.append(FieldViolation("page", "give either page or page_token, not both"))
        if violations:
            raise ValidationFailed.of(violations)
        size = clamp_page_size(page_size)
        cursor = self._codec.decode(page_token, scope, cursor_len=2)
        if cursor is not None:
            return PageRequest(size=size, after=(cursor_datetime(cursor[0]), cursor_str(cursor[1])))
        return PageRequest(size=size, skip=(page - 1) * size if page > 1 else 0)

    def token(self, after: tuple[datetime, str], *, scope: str) -> str:
        created_at, item_id = after
        return self._codec.encode(scope, [created_at.isoformat(), item_id])

    def page(self, found: Slice[T], *, scope: str) -> Page[T]:
        """The page of what a store found, with the token of the next one when there is more."""
        has_next = found.has_more and found.items
        token = self.token((found.items[-1].created_at, found.items[-1].id), scope=scope) if has_next else ""
        return Page(items=found.items, next_page_token=token, total_size=found.total)


class _Listed(Protocol):
    """What a listed resource has: its sort key."""

    @property
    def created_at(self) -> datetime: ...

    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Listed)


def keyset_slice(items: list[T], page: PageRequest) -> Slice[T]:
    """One page of items held in memory, in (`created_at`, `id`) order, after `page.after` or
    after `page.skip` items: what the SQL store's keyset query answers, for the in-memory store."""
    ordered = sorted(items, key=lambda item: (item.created_at, item.id))
    if page.after is not None:
        ordered = [item for item in ordered if (item.created_at, item.id) > page.after]
    else:
        ordered = ordered[page.skip :]
    return Slice(items=ordered[: page.size], has_more=len(ordered) > page.size, total=len(items))
