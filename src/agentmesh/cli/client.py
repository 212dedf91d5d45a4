"""How CLI commands reach a running mesh and sign in: one connection helper, and one error type for
what the terminal should show (the shared options are in `cli/options.py`).

The registry's API is served by the registry itself and, publicly, by the gateway's gRPC port, so
one address serves both. Without `--registry` (or `AGENTMESH_REGISTRY_ADDRESS`) commands dial the
gateway that `agentmesh up` starts, `127.0.0.1:50050`. Credentials come from flags or the
environment, flags first: a bearer token (`AGENTMESH_TOKEN`), else an e-mail and password
(`AGENTMESH_EMAIL` / `AGENTMESH_PASSWORD`); a missing password is asked for on a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import typer
from rich.console import Console
from rich.markup import escape

from agentmesh.cli.options import DEFAULT_ADDRESS
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.errors import DomainError, Unauthenticated, Unavailable

Metadata = tuple[tuple[str, str], ...]


class CliError(Exception):
    """A failure to show the user as one clear message (no traceback); the command exits 1."""


@dataclass(frozen=True)
class Credentials:
    """Who the command acts as: a bearer token, or an e-mail and password to sign in with."""

    email: str = ""
    password: str = ""
    token: str = ""

    @classmethod
    def from_options(
        cls, *, email: str | None, password: str | None, token: str | None, prompt: bool = True
    ) -> Credentials:
        """From the command's options; asks for a missing password on a terminal."""
        if token:
            return cls(token=token)
        if not email:
            raise CliError(
                "sign in with --email and --password (or AGENTMESH_EMAIL / AGENTMESH_PASSWORD), "
                "or pass a token with --token (AGENTMESH_TOKEN)"
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


def address_of(*candidates: str | None) -> str:
    """The first address given, else the local gateway's."""
    return next((candidate for candidate in candidates if candidate), DEFAULT_ADDRESS)


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


@asynccontextmanager
async def connect(address: str, credentials: Credentials) -> AsyncIterator[Connection]:
    """Opens a channel to `address` and signs in (unless given a token); closes it on exit.
    Raises CliError when the mesh cannot be reached or the sign-in fails."""
    channel = create_channel(address)
    try:
        token = credentials.token
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


def describe(error: DomainError) -> str:
    """A DomainError as one line for the terminal: its message and any field violations."""
    if isinstance(error, Unavailable):
        return f"the mesh is unavailable: {error.message}"
    details = "; ".join(f"{violation.field}: {violation.description}" for violation in error.violations)
    return f"{error.message} ({details})" if details else error.message


def fail(message: str) -> typer.Exit:
    """Prints `message` as an error on stderr; returns the Exit(1) for the caller to raise."""
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(1)
