"""Page tokens: opaque, bound to the scope that issued them, refused when forged, altered or
malformed; signed with a key, still checked without one. And page sizes."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from agentmesh.runtime.errors import InvalidArgument
from agentmesh.runtime.pagination import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MAX_TOKEN_CHARS,
    InvalidPageToken,
    PageTokenCodec,
    clamp_page_size,
    cursor_datetime,
    cursor_int,
    cursor_str,
)

SCOPE = {"session_id": "s-1", "agent": "a", "descending": False}
CURSOR = ["2030-01-01T00:00:00+00:00", "s-1", 42]
SIGNED = PageTokenCodec.from_secret("s" * 32, purpose="test.page-token")
UNSIGNED = PageTokenCodec()
CODECS = pytest.mark.parametrize("codec", [SIGNED, UNSIGNED], ids=["signed", "unsigned"])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def refused(
    codec: PageTokenCodec, token: str, scope: object = SCOPE, *, cursor_len: int = 3
) -> InvalidPageToken:
    with pytest.raises(InvalidPageToken) as caught:
        codec.decode(token, scope, cursor_len=cursor_len)  # type: ignore[arg-type]
    return caught.value


@CODECS
def test_a_token_round_trips_for_its_scope(codec: PageTokenCodec) -> None:
    token = codec.encode(SCOPE, CURSOR)
    assert "42" not in token and "s-1" not in token  # opaque to a casual reader
    assert codec.decode(token, dict(SCOPE), cursor_len=3) == CURSOR
    assert codec.decode(codec.encode("agents:p1", ["é", 1]), "agents:p1", cursor_len=2) == ["é", 1]


@CODECS
def test_no_token_is_the_first_page(codec: PageTokenCodec) -> None:
    assert codec.decode("", SCOPE, cursor_len=1) is None


@CODECS
def test_a_token_for_another_scope_is_refused(codec: PageTokenCodec) -> None:
    token = codec.encode(SCOPE, [42])
    error = refused(codec, token, SCOPE | {"agent": "b"}, cursor_len=1)
    assert error.message == "page_token was issued for a request with other filters"
    refused(codec, codec.encode("agents:p1", [42]), "agents:p2", cursor_len=1)


def test_the_error_is_invalid_argument_on_the_page_token_field() -> None:
    error = refused(UNSIGNED, "%%%")
    assert isinstance(error, InvalidArgument)
    assert error.reason == "INVALID_PAGE_TOKEN"
    assert [v.field for v in error.violations] == ["page_token"]
    assert error.message == "page_token is not a token this service issued"


def test_a_tampered_token_is_refused() -> None:
    payload, signature = SIGNED.encode(SCOPE, CURSOR).split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    altered = b64(json.dumps(body | {"c": ["2030-01-01T00:00:00+00:00", "s-1", 41]}).encode())
    refused(SIGNED, f"{altered}.{signature}")
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    refused(SIGNED, f"{payload}.{flipped}")
    refused(SIGNED, f"{payload}.{signature}x")
    refused(SIGNED, payload)  # the signature dropped


def test_a_token_signed_with_another_key_or_purpose_is_refused() -> None:
    token = SIGNED.encode(SCOPE, CURSOR)
    refused(PageTokenCodec.from_secret("t" * 32, purpose="test.page-token"), token)
    refused(PageTokenCodec.from_secret("s" * 32, purpose="other.page-token"), token)


def test_signed_and_unsigned_tokens_are_not_interchangeable() -> None:
    refused(UNSIGNED, SIGNED.encode(SCOPE, CURSOR))
    refused(SIGNED, UNSIGNED.encode(SCOPE, CURSOR))


def test_without_a_secret_tokens_are_unsigned() -> None:
    codec = PageTokenCodec.from_secret("", purpose="test.page-token")
    token = codec.encode(SCOPE, CURSOR)
    assert "." not in token
    assert UNSIGNED.decode(token, SCOPE, cursor_len=3) == CURSOR
    assert UNSIGNED.decode(token + "==", SCOPE, cursor_len=3) == CURSOR  # base64 padding is tolerated


def test_unsigned_tokens_are_still_checked_but_can_be_written_by_hand() -> None:
    digest = json.loads(base64.urlsafe_b64decode(UNSIGNED.encode(SCOPE, [1]) + "==="))["q"]
    assert UNSIGNED.decode(
        b64(json.dumps({"v": 1, "q": digest, "c": [7]}).encode()), SCOPE, cursor_len=1
    ) == [7]
    for body in (
        {"v": 2, "q": digest, "c": [7]},
        {"v": 1, "q": "x", "c": [7]},
        {"v": 1, "q": digest, "c": 7},
    ):
        refused(UNSIGNED, b64(json.dumps(body).encode()), cursor_len=1)


@CODECS
@pytest.mark.parametrize(
    "token",
    [
        "%%%",
        "x",
        ".",
        "a.b",
        "a.b.c",
        "e30",  # {}
        "e30.",
        "W10",  # []
        "eyJ2IjoxfQ",  # {"v":1}
        "!!!.???",
        "ü.ü",
        "bm90IGpzb24",  # "not json"
        b64(b"7"),  # what a base64-id token would be
        b64(b"\xff\xfe"),  # not UTF-8
        b64(b"[" * 1500),  # deeper than the JSON parser recurses
    ],
)
def test_garbage_is_refused(codec: PageTokenCodec, token: str) -> None:
    refused(codec, token)


@CODECS
def test_an_over_long_token_is_refused_before_it_is_read(codec: PageTokenCodec) -> None:
    refused(codec, "A" * (MAX_TOKEN_CHARS + 1))
    # The longest cursor a service could issue still fits: 255 characters of 4 UTF-8 bytes each.
    cursor = ["2030-01-01T00:00:00.000000+00:00", "😀" * 255, 2**63 - 1]
    assert codec.decode(codec.encode(SCOPE, cursor), SCOPE, cursor_len=3) == cursor


@CODECS
def test_a_cursor_of_the_wrong_length_is_refused(codec: PageTokenCodec) -> None:
    token = codec.encode(SCOPE, [1, 2])
    refused(codec, token, cursor_len=1)
    refused(codec, token, cursor_len=3)


def test_cursor_values_are_checked() -> None:
    assert cursor_int(7) == 7
    assert cursor_str("x") == "x"
    assert cursor_datetime("2030-01-01T00:00:00+00:00") == datetime(2030, 1, 1, tzinfo=UTC)
    for bad in ("7", 7.0, True, None, 2**63, -(2**63) - 1):
        with pytest.raises(InvalidPageToken):
            cursor_int(bad)
    for bad in (7, None, ["x"]):
        with pytest.raises(InvalidPageToken):
            cursor_str(bad)
    for bad in ("2030-01-01T00:00:00", "yesterday", 0):
        with pytest.raises(InvalidPageToken):
            cursor_datetime(bad)


def test_page_sizes() -> None:
    assert clamp_page_size(0) == DEFAULT_PAGE_SIZE
    assert clamp_page_size(0, default=100) == 100
    assert clamp_page_size(7) == 7
    assert clamp_page_size(10**6) == MAX_PAGE_SIZE
    with pytest.raises(ValueError):
        clamp_page_size(-1)
