# syntax=docker/dockerfile:1
# One image for every agentmesh service; the container's command picks the service:
#   docker run agentmesh:dev agentmesh serve registry
# Configuration is environment only (AGENTMESH_*, OTEL_*); see docker-compose.yml.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/agentmesh \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy
WORKDIR /src
# Only what the workspace is built from; the generated gRPC code is committed in each member.
COPY pyproject.toml uv.lock README.md ./
COPY services ./services
COPY src ./src
# The workspace's one lock decides every version; members install as regular (not editable)
# packages, without the dev group.
RUN pip install uv==0.13.8 \
    && uv sync --locked --no-dev --no-editable

FROM python:3.11-slim
ENV PATH=/opt/agentmesh/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Inside a container a service must listen on every interface, on its well-known port (the
# settings' own defaults are loopback and, for the internal services, a free port).
ENV AGENTMESH_REGISTRY_HOST=0.0.0.0 \
    AGENTMESH_REGISTRY_PORT=50051 \
    AGENTMESH_MEMORY_HOST=0.0.0.0 \
    AGENTMESH_MEMORY_PORT=50052 \
    AGENTMESH_EXECUTOR_HOST=0.0.0.0 \
    AGENTMESH_EXECUTOR_PORT=50053 \
    AGENTMESH_GATEWAY_HOST=0.0.0.0 \
    AGENTMESH_GATEWAY_PORT=50050 \
    AGENTMESH_GATEWAY_HTTP_HOST=0.0.0.0 \
    AGENTMESH_GATEWAY_HTTP_PORT=8080
RUN groupadd --system --gid 10001 agentmesh \
    && useradd --system --uid 10001 --gid agentmesh --home-dir /home/agentmesh --create-home \
        --shell /usr/sbin/nologin agentmesh
COPY --from=build /opt/agentmesh /opt/agentmesh
USER agentmesh:agentmesh
WORKDIR /home/agentmesh
# gateway gRPC, registry, memory, executor, gateway HTTP
EXPOSE 50050 50051 50052 50053 8080 9464
# Every service drains in-flight calls on SIGTERM.
STOPSIGNAL SIGTERM
CMD ["agentmesh", "--help"]
