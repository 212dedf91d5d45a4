"""How CLI commands reach a running mesh and sign in: one connection helper, and one error type for
what the terminal should show (the shared options are in `cli/options.py`).

Commands dial the gateway (`options.gateway_address`), whose public gRPC port serves the registry's
and memory's APIs too. Credentials come from flags or the
environment, flags first: a bearer token (`AGENTMESH_TOKEN`), else an e-mail and password
(`AGENTMESH_EMAIL` / `AGENTMESH_PASSWORD`; a missing password is asked for on a terminal), else
the login `agentmesh login` kept (`cli/login.py`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import typer
from rich.markup import escape

from agentmesh.cli.channel import ChannelError, open_channel
from agentmesh.cli.login import StoredLogin, exclusively
from agentmesh.cli.options import gateway_address
from agentmesh.cli.output import stderr_console
from agentmesh.cli.spinner import run_waiting
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.errors import DomainError, Unauthenticated, Unavailable

Metadata = tuple[tuple[str, str], ...]


class CliError(Exception):
    """A failure to show the user as one clear message (no traceback); the command exits 1."""


@dataclass(frozen=True)
class Credentials:
    """Who the command acts as: a bearer token, an e-mail and password to sign in with, or the
    login `agentmesh login` kept."""

    email: str = ""
    password: str = ""
    token: str = ""
    stored: StoredLogin | None = None

    @classmethod
    def from_options(
        cls,
        *,
        email: str | None,
        password: str | None,
        token: str | None,
        prompt: bool = True,
        stored: bool = True,
    ) -> Credentials:
        """From the command's options, else the kept login; asks for a missing password on a
        terminal."""
        if token:
            return cls(token=token)
        if not email:
            kept = StoredLogin.load() if stored else None
            if kept is not None:
                return cls(email=kept.email, stored=kept)
            raise CliError(
                "sign in with --email and --password (or AGENTMESH_EMAIL / AGENTMESH_PASSWORD), "
                "pass a token with --token (AGENTMESH_TOKEN), or run `agentmesh login` once"
            )
        if not password:
            if not (prompt and sys.stdin.isatty()):
                raise CliError(f"no password for {email}: pass --password or set AGENTMESH_PASSWORD")
            password = typer.prompt(f"password for {email}", hide_input=True)
        return cls(email=email, password=password)


@dataclass
class Connection:
    """A signed-in channel to a mesh: any stub can use `channel` with `metadata` (the bearer
    token); `registry` is the typed registry client over it."""

    address: str
    channel: grpc.aio.Channel
    metadata: Metadata

    @property
    def registry(self) -> RegistryClient:
        return RegistryClient(self.channel)


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def dial(address: str) -> grpc.aio.Channel:
    """A channel to the gateway at `address` (TLS per cli/channel.py); CliError when the address
    or the CA file is unusable."""
    try:
        return open_channel(address)
    except ChannelError as error:
        raise CliError(str(error)) from None


@asynccontextmanager
async def connect(address: str, credentials: Credentials) -> AsyncIterator[Connection]:
    """Opens a channel to `address` and signs in (unless given a token); closes it on exit.
    Raises CliError when the mesh cannot be reached or the sign-in fails."""
    channel = dial(address)
    try:
        token = credentials.token
        if not token and credentials.stored is not None:
            token = await _refresh(RegistryClient(channel), credentials.stored, address)
        if not token:
            try:
                tokens = await RegistryClient(channel).login(credentials.email, credentials.password)
            except Unauthenticated as error:
                raise CliError(f"sign-in as {credentials.email} failed: {error.message}") from None
            except Unavailable as error:
                raise CliError(f"cannot reach the mesh at {address}: {error.message}") from None
            token = tokens.access_token
        yield Connection(address=address, channel=channel, metadata=bearer(token))
    finally:
        await channel.close()


async def _refresh(registry: RegistryClient, stored: StoredLogin, address: str) -> str:
    """An access token for the kept login; the rotated refresh token is kept in its place (under
    the login's lock, re-read there: another command may have rotated it meanwhile)."""
    try:
        with exclusively():
            stored = StoredLogin.load() or stored
            tokens = await registry.refresh_tokens(stored.refresh_token)
            if tokens.refresh_token and tokens.refresh_token != stored.refresh_token:
                StoredLogin(stored.address, stored.email, tokens.refresh_token).save()
    except Unauthenticated:
        raise CliError(
            f"the login kept for {stored.email} at {stored.address} is no longer valid: "
            "run `agentmesh login` again"
        ) from None
    except Unavailable as error:
        raise CliError(f"cannot reach the mesh at {address}: {error.message}") from None
    return tokens.access_token


def describe(error: DomainError) -> str:
    """A DomainError as one line for the terminal: its message and any field violations."""
    if isinstance(error, Unavailable):
        return f"the mesh is unavailable: {error.message}"
    details = "; ".join(f"{violation.field}: {violation.description}" for violation in error.violations)
    return f"{error.message} ({details})" if details else error.message


def run_and_print(work: Coroutine[object, object, str | None]) -> None:
    """Runs a command's work and prints the text it returns; a CliError or the mesh's refusal
    becomes one clear line on stderr and exit status 1."""
    try:
        text = run_waiting(work)
    except CliError as error:
        raise fail(str(error)) from None
    except DomainError as error:
        raise fail(describe(error)) from None
    if text is not None:
        typer.echo(text)


def run_signed_in(
    gateway: str | None,
    credentials: tuple[str | None, str | None, str | None],
    work: Callable[[Connection], Awaitable[str | None]],
) -> None:
    """Signs in with the command's `(email, password, token)` options (or what they fall back
    to), runs `work(connection)` against the gateway and prints what it returns, as
    `run_and_print` does."""
    email, password, token = credentials

    async def main() -> str | None:
        signed_in = Credentials.from_options(email=email, password=password, token=token)
        async with connect(gateway_address(gateway), signed_in) as connection:
            return await work(connection)

    run_and_print(main())


def fail(message: str) -> typer.Exit:
    """Prints `message` as an error on stderr; returns the Exit(1) for the caller to raise."""
    stderr_console().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(1)
