"""The options CLI commands share: where the mesh is and who signs in. Light on purpose (typer
only), so a command module can declare its options without importing gRPC or the services.

Every command that talks to a mesh reaches it through its gateway: `--gateway` (or
`AGENTMESH_GATEWAY_ADDRESS`), by default the one `agentmesh up` starts, `127.0.0.1:50050`, whose
public gRPC port serves the registry's and memory's APIs too. `apply`, `users` and `demo` once took
that address as `--registry` / `AGENTMESH_REGISTRY_ADDRESS`; scripts still passing it are served,
with a warning (`gateway_address`).
"""

from __future__ import annotations

from typing import Annotated

import typer

DEFAULT_ADDRESS = "127.0.0.1:50050"

# `agentmesh --ca-file PATH …` (cli/main.py): the private CA a TLS gateway's certificate is
# checked against (cli/channel.py), over AGENTMESH_TLS_CA_FILE.
ca_file_override: str | None = None

# The old name of `--gateway` on `apply`, `users` and `demo`: hidden from help, still obeyed.
RegistryAliasOption = Annotated[
    str | None,
    typer.Option("--registry", envvar="AGENTMESH_REGISTRY_ADDRESS", hidden=True),
]
GatewayOption = Annotated[
    str | None,
    typer.Option(
        "--gateway",
        envvar="AGENTMESH_GATEWAY_ADDRESS",
        show_envvar=True,
        help=f"The gateway's gRPC address: host:port, or https://host[:port] for a gateway serving TLS. "
        f"Default: {DEFAULT_ADDRESS}.",
    ),
]
EmailOption = Annotated[
    str | None,
    typer.Option(
        "--email",
        envvar="AGENTMESH_EMAIL",
        show_envvar=True,
        help="Sign in as this user.",
    ),
]
PasswordOption = Annotated[
    str | None,
    typer.Option(
        "--password",
        envvar="AGENTMESH_PASSWORD",
        show_envvar=True,
        help="The user's password (prefer the environment variable; asked for when missing).",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        # An API key is a bearer credential like an access token; programs keep one in
        # AGENTMESH_API_KEY (the gateway accepts it, the registry's own port does not).
        envvar=["AGENTMESH_TOKEN", "AGENTMESH_API_KEY"],
        show_envvar=True,
        help="An access token or API key (amk_…) to use instead of signing in.",
    ),
]


def gateway_address(gateway: str | None, registry_alias: str | None = None) -> str:
    """The gateway to dial: `--gateway`, else the deprecated `--registry`, else the local gateway.
    A deprecated address given says so on stderr, in one line."""
    if registry_alias:
        what = "ignored: --gateway / AGENTMESH_GATEWAY_ADDRESS is set" if gateway else "used as the gateway"
        typer.echo(
            f"agentmesh: --registry / AGENTMESH_REGISTRY_ADDRESS is deprecated ({what}); "
            "use --gateway / AGENTMESH_GATEWAY_ADDRESS",
            err=True,
        )
    return gateway or registry_alias or DEFAULT_ADDRESS
