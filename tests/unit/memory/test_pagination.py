"""Page tokens: opaque, and valid only for the filters that issued them."""

from __future__ import annotations

import pytest

from agentmesh.memory.errors import InvalidPageToken
from agentmesh.memory.pagination import decode_page_token, encode_page_token

SCOPE = {"session_id": "s-1", "agent": "a", "descending": False}


def test_a_token_round_trips_for_its_scope() -> None:
    token = encode_page_token(SCOPE, ["2030-01-01T00:00:00+00:00", "s-1", 42])
    assert "42" not in token and "s-1" not in token  # opaque to a casual reader
    assert decode_page_token(token, dict(SCOPE), cursor_len=3) == ["2030-01-01T00:00:00+00:00", "s-1", 42]


def test_no_token_is_the_first_page() -> None:
    assert decode_page_token("", SCOPE, cursor_len=1) is None


def test_a_token_for_other_filters_is_refused() -> None:
    token = encode_page_token(SCOPE, [42])
    with pytest.raises(InvalidPageToken, match="other filters"):
        decode_page_token(token, SCOPE | {"agent": "b"}, cursor_len=1)


@pytest.mark.parametrize("token", ["%%%", "e30", "W10", "eyJ2IjoxfQ", "x" * 3000])
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(InvalidPageToken) as caught:
        decode_page_token(token, SCOPE, cursor_len=1)
    assert [v.field for v in caught.value.violations] == ["page_token"]


def test_a_token_with_the_wrong_cursor_shape_is_refused() -> None:
    token = encode_page_token(SCOPE, [1, 2])
    with pytest.raises(InvalidPageToken):
        decode_page_token(token, SCOPE, cursor_len=1)
