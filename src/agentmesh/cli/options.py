"""The options CLI commands share: where the mesh is and who signs in. Light on purpose (typer
only), so a command module can declare its options without importing gRPC or the services.

Without `--registry` (or `AGENTMESH_REGISTRY_ADDRESS`) commands dial the gateway that `agentmesh up`
starts, `127.0.0.1:50050`, whose public gRPC port serves the registry API too.
"""

from __future__ import annotations

from typing import Annotated

import typer

DEFAULT_ADDRESS = "127.0.0.1:50050"

# `agentmesh --ca-file PATH …` (cli/main.py): the private CA a TLS gateway's certificate is
# checked against (cli/channel.py), over AGENTMESH_TLS_CA_FILE.
ca_file_override: str | None = None

RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        envvar="AGENTMESH_REGISTRY_ADDRESS",
        show_envvar=True,
        help=f"gRPC host:port of the registry, or of the gateway (it serves the registry API). "
        f"Default: the local gateway, {DEFAULT_ADDRESS}.",
    ),
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
