"""The registry's List paging: a token or a page number, never both; tokens bound to their list
and to the registry's secret. (The tokens themselves: tests/unit/runtime/test_pagination.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.pagination import PageTokens
from agentmesh.runtime.pagination import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, InvalidPageToken

KEY = (datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "id-1")


def test_a_token_round_trips_within_its_list() -> None:
    tokens = PageTokens("s" * 32)
    token = tokens.token(KEY, scope="agents:p1")
    assert "id-1" not in token  # opaque enough not to invite hand-editing
    assert token.count(".") == 1  # signed
    request = tokens.request(page_size=5, page_token=token, page=0, scope="agents:p1")
    assert (request.size, request.after, request.skip) == (5, KEY, 0)


@pytest.mark.parametrize("bad", ["x", "a.b", ".", "e30.", "!!!.???", "ü.ü"])
def test_garbage_is_refused(bad: str) -> None:
    with pytest.raises(InvalidPageToken) as caught:
        PageTokens("s" * 32).request(page_size=0, page_token=bad, page=0, scope="x")
    assert [v.field for v in caught.value.violations] == ["page_token"]


def test_no_token_and_no_page_is_the_first_page() -> None:
    request = PageTokens("s" * 32).request(page_size=0, page_token="", page=0, scope="x")
    assert (request.after, request.skip) == (None, 0)


def test_tokens_of_another_list_or_secret_are_refused() -> None:
    token = PageTokens("s" * 32).token(KEY, scope="agents:p1")
    with pytest.raises(InvalidPageToken):
        PageTokens("s" * 32).request(page_size=0, page_token=token, page=0, scope="agents:p2")
    with pytest.raises(InvalidPageToken):
        PageTokens("t" * 32).request(page_size=0, page_token=token, page=0, scope="agents:p1")


def test_sizes_and_pages() -> None:
    tokens = PageTokens("s" * 32)
    assert tokens.request(page_size=0, page_token="", page=0, scope="x").size == DEFAULT_PAGE_SIZE
    assert tokens.request(page_size=10**6, page_token="", page=0, scope="x").size == MAX_PAGE_SIZE
    assert tokens.request(page_size=10, page_token="", page=3, scope="x").skip == 20
    assert tokens.request(page_size=10, page_token="", page=1, scope="x").skip == 0
    for size, page in ((-1, 0), (0, -1)):
        with pytest.raises(ValidationFailed):
            tokens.request(page_size=size, page_token="", page=page, scope="x")


def test_a_page_and_a_token_together_are_refused_with_every_other_violation() -> None:
    tokens = PageTokens("s" * 32)
    token = tokens.token(KEY, scope="x")
    with pytest.raises(ValidationFailed) as caught:
        tokens.request(page_size=-1, page_token=token, page=2, scope="x")
    assert [v.field for v in caught.value.violations] == ["page_size", "page"]
