"""`agentmesh login` / `agentmesh logout`: keep the CLI signed in to a mesh.

`login` signs in once and keeps the mesh's address, the e-mail and the refresh token (never the
password) in `credentials.json` in the user's config directory (`$AGENTMESH_CONFIG_DIR`, else
`$XDG_CONFIG_HOME/agentmesh`, else `~/.config/agentmesh`), readable by the user only. Commands
given no token and no e-mail use it: the refresh token buys a fresh access token, and the rotated
refresh token is written back. `logout` revokes the refresh token and removes the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, gateway_address
from agentmesh.cli.spinner import run_waiting

CREDENTIALS_FILE = "credentials.json"
LOCK_FILE = f"{CREDENTIALS_FILE}.lock"


def config_dir() -> Path:
    """Where the CLI keeps its state."""
    if explicit := os.environ.get("AGENTMESH_CONFIG_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agentmesh"


@dataclass(frozen=True)
class StoredLogin:
    """What `agentmesh login` keeps: where, as whom, and the refresh token."""

    address: str
    email: str
    refresh_token: str

    @classmethod
    def load(cls) -> StoredLogin | None:
        """The kept login, or None when there is none (or it is unreadable)."""
        path = config_dir() / CREDENTIALS_FILE
        try:
            data = json.loads(path.read_text())
            return cls(address=data["address"], email=data["email"], refresh_token=data["refresh_token"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self) -> Path:
        """Writes the file with owner-only permissions (created so, never widened), whole: a new
        file takes the old one's place, so a command reading it meanwhile — they read it before
        they take the login's lock — sees the old login or the new one, never a truncated file
        (which it took for no login at all)."""
        directory = config_dir()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / CREDENTIALS_FILE
        descriptor, written = tempfile.mkstemp(dir=directory, prefix=f".{CREDENTIALS_FILE}.")  # 0o600
        try:
            with os.fdopen(descriptor, "w") as file:
                json.dump(asdict(self), file)
            os.replace(written, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(written)
            raise
        return path

    @staticmethod
    def forget() -> bool:
        """Removes the file, and the lock beside it (`exclusively`); whether there was a login."""
        directory = config_dir()
        (directory / LOCK_FILE).unlink(missing_ok=True)
        try:
            (directory / CREDENTIALS_FILE).unlink()
        except FileNotFoundError:
            return False
        return True


@contextmanager
def exclusively() -> Iterator[None]:
    """Holds the kept login for one process at a time. Refresh tokens rotate, and the registry
    takes a refresh token used twice for a stolen one (it revokes the whole sign-in), so two
    commands running at once must not both spend the same token: the second waits, then reads
    the token the first one wrote."""
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def login(
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
) -> None:
    """Sign in once and keep the CLI signed in (a refresh token in the user's config directory)."""
    from agentmesh.cli.client import CliError, Credentials, fail

    address = gateway_address(gateway)
    if not email:
        email = typer.prompt("e-mail")
    try:
        credentials = Credentials.from_options(email=email, password=password, token=None, stored=False)
    except CliError as error:
        raise fail(str(error)) from None

    try:
        path = run_waiting(
            keep_login(address, credentials.email, credentials.password), f"signing in to {address}"
        )
    except CliError as error:
        raise fail(str(error)) from None
    typer.echo(f"signed in to {address} as {credentials.email} (kept in {path})")


async def keep_login(address: str, email: str, password: str) -> Path:
    """Signs in to the gateway at `address` and keeps the login (what `agentmesh login` does, and
    `agentmesh up` for the admin it made); returns the file. CliError says why it could not."""
    from agentmesh.cli.client import CliError, dial
    from agentmesh.registry.client import RegistryClient
    from agentmesh.runtime.errors import DomainError, Unauthenticated, Unavailable

    channel = dial(address)
    try:
        tokens = await RegistryClient(channel).login(email, password)
    except Unauthenticated as error:
        raise CliError(f"sign-in as {email} failed: {error.message}") from None
    except Unavailable as error:
        raise CliError(f"cannot reach the mesh at {address}: {error.message}") from None
    except DomainError as error:
        raise CliError(f"sign-in as {email} failed: {error.message}") from None
    finally:
        await channel.close()
    kept = StoredLogin(address=address, email=email, refresh_token=tokens.refresh_token)
    return await asyncio.to_thread(kept.save)


def logout(
    keep_session: Annotated[
        bool, typer.Option("--keep-session", help="Only forget the login here; do not revoke it.")
    ] = False,
) -> None:
    """Forget the kept login, revoking its refresh token in the mesh."""
    with exclusively():  # no command spends the refresh token meanwhile
        stored = StoredLogin.load()
        if stored is None:
            StoredLogin.forget()
            typer.echo("not signed in")
            return
        if not keep_session:
            _revoke(stored)
        StoredLogin.forget()
    typer.echo(f"signed out of {stored.address} ({stored.email})")


def _revoke(stored: StoredLogin) -> None:
    """Revokes the kept login's refresh token in its mesh; a failure is said on stderr (the file
    goes anyway: the login is useless to us now)."""
    from agentmesh.cli.client import CliError, dial
    from agentmesh.registry.client import RegistryClient
    from agentmesh.runtime.errors import DomainError

    async def revoke() -> None:
        channel = dial(stored.address)
        try:
            await RegistryClient(channel).revoke_refresh_token(stored.refresh_token)
        finally:
            await channel.close()

    try:
        asyncio.run(revoke())
    except DomainError as error:
        typer.echo(f"could not revoke the login at {stored.address}: {error.message}", err=True)
    except CliError as error:
        typer.echo(f"could not revoke the login at {stored.address}: {error}", err=True)
