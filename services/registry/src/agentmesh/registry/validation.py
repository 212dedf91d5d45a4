"""Input validation rules: each function returns the field violations it finds, named by the
request field path (`agent.config.network_access`), so one INVALID_ARGUMENT lists them all."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.models import (
    DOUBLE_TEXTING_POLICIES,
    AgentConfig,
    AgentKind,
    AgentTypeFields,
    McpServer,
    ProjectFields,
)
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.limits import MAX_JSON_DEPTH, json_depth

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
DNS_LABEL_RULE = "must be a DNS label: 1-63 characters a-z, 0-9 and '-', not starting or ending with '-'"
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

MAX_EMAIL = 320
MAX_PERSON_NAME = 100
MAX_AGENT_NAME = 100
MAX_DISPLAY_NAME = 200
MAX_DESCRIPTION = 10_000
# A project limit's largest value: what JSON numbers hold exactly (clients in JavaScript too).
MAX_LIMIT = 2**53 - 1
MAX_PROMPT = 100_000
MAX_MODEL_NAME = 200
MAX_LIST_ITEMS = 100
MAX_MAX_STEPS = 1000
MAX_MAX_ITERATIONS = 10_000
MAX_TOOL_RULES = 200
MAX_TOOL_PATTERN = 200
MAX_INPUT_EXPIRY_SECONDS = 30 * 86_400
# What an agent type may set its delegation bounds to (DelegationLimits): a tenant may tighten
# the executor's defaults, or loosen them only this far.
MAX_DELEGATIONS_PER_STEP = 64
MAX_DELEGATIONS_PER_CHAT = 10_000
# A prompt budget beyond any model's context (ten million tokens) is a mistake.
MAX_CONTEXT_BUDGET_TOKENS = 10_000_000
DEFAULT_MAX_STEPS = 10
MCP_TRANSPORTS = ("stdio", "streamable_http")


def raise_if(violations: list[FieldViolation]) -> None:
    """One INVALID_ARGUMENT naming every violation found, if any."""
    if violations:
        raise ValidationFailed.of(violations)


def required(field: str, value: str) -> list[FieldViolation]:
    return [] if value else [FieldViolation(field, "is required")]


def exactly_one(field_a: str, value_a: str, field_b: str, value_b: str) -> list[FieldViolation]:
    """For a read by either of two keys (id or slug): one of them, not both, not neither."""
    if bool(value_a) == bool(value_b):
        return [FieldViolation(field_a, f"give exactly one of {field_a} and {field_b}")]
    return []


def update_paths(mask: Iterable[str], allowed: Iterable[str]) -> tuple[list[str], list[FieldViolation]]:
    """The fields an update mask names, each once and in its order (`*`: every allowed one), and
    its violations: none named, or one that is unknown or read-only."""
    allowed = list(allowed)
    paths = list(dict.fromkeys(mask))
    if "*" in paths:
        return allowed, []
    unknown = [path for path in paths if path not in allowed]
    if unknown:
        problem = f"unknown or read-only field {', '.join(map(repr, unknown))}"
        return paths, [FieldViolation("update_mask", problem)]
    if not paths:
        problem = f"name the fields to change (or '*'), of {', '.join(allowed)}"
        return paths, [FieldViolation("update_mask", problem)]
    return paths, []


def is_dns_label(value: str) -> bool:
    return bool(DNS_LABEL.match(value))


def slugify(text: str) -> str:
    """A DNS-label slug made from a display name ("My Project" → "my-project"), or ''."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:63].rstrip("-")


def normalize_email(email: str) -> str:
    return email.strip().lower()


def check_registration(email: str, first_name: str, last_name: str) -> list[FieldViolation]:
    """A new user's e-mail and names (the password policy checks the password:
    identity/password_policy.py)."""
    violations = []
    if not email:
        violations.append(FieldViolation("email", "is required"))
    elif len(email) > MAX_EMAIL or not EMAIL.match(email):
        violations.append(FieldViolation("email", "must be an e-mail address"))
    for field, value in (("first_name", first_name), ("last_name", last_name)):
        violations += _max_length(field, value, MAX_PERSON_NAME)
        violations += _printable(field, value)
    return violations


def check_agent_type(fields: AgentTypeFields, *, prefix: str = "agent_type") -> list[FieldViolation]:
    violations = _name_and_slug(prefix, fields.name, fields.slug)
    violations += _max_length(f"{prefix}.description", fields.description, MAX_DESCRIPTION)
    violations += _strings(f"{prefix}.expertise", fields.expertise, max_length=MAX_DISPLAY_NAME)
    violations += _max_length(f"{prefix}.personality_prompt", fields.personality_prompt, MAX_PROMPT)
    if fields.kind is AgentKind.LLM and not fields.primary_model.strip():
        violations.append(FieldViolation(f"{prefix}.primary_model", "is required for kind llm"))
    violations += _max_length(f"{prefix}.primary_model", fields.primary_model, MAX_MODEL_NAME)
    violations += _strings(f"{prefix}.fallback_models", fields.fallback_models, max_length=MAX_MODEL_NAME)
    violations += _strings(f"{prefix}.tools", fields.tools, max_length=MAX_DISPLAY_NAME, unique=True)
    violations += _mcp_servers(f"{prefix}.mcp_servers", fields.mcp_servers)
    violations += _agent_refs(f"{prefix}.sub_agents", fields.sub_agents)
    violations += _range(f"{prefix}.max_steps", fields.max_steps, 0, MAX_MAX_STEPS)
    violations += _range(f"{prefix}.max_iterations", fields.max_iterations, 0, MAX_MAX_ITERATIONS)
    violations += _shallow(f"{prefix}.model_params", fields.model_params)
    violations += check_tool_permissions(f"{prefix}.tool_permissions", fields.tool_permissions)
    violations += _range(
        f"{prefix}.input_expiry_seconds", fields.input_expiry_seconds, 0, MAX_INPUT_EXPIRY_SECONDS
    )
    limits = fields.delegation_limits
    violations += _range(
        f"{prefix}.delegation_limits.max_per_step", limits.max_per_step, 0, MAX_DELEGATIONS_PER_STEP
    )
    violations += _range(
        f"{prefix}.delegation_limits.max_per_chat", limits.max_per_chat, 0, MAX_DELEGATIONS_PER_CHAT
    )
    violations += _range(
        f"{prefix}.context_budget_tokens", fields.context_budget_tokens, 0, MAX_CONTEXT_BUDGET_TOKENS
    )
    violations += _max_length(f"{prefix}.compaction_model", fields.compaction_model, MAX_MODEL_NAME)
    violations += _max_length(f"{prefix}.compaction_prompt", fields.compaction_prompt, MAX_PROMPT)
    if fields.run_budget.max_tokens < 0 or not 0 <= fields.run_budget.max_cost < float("inf"):
        violations.append(FieldViolation(f"{prefix}.run_budget", "must not be negative"))
    return violations


def check_project(fields: ProjectFields, *, prefix: str = "project") -> list[FieldViolation]:
    violations = _name_and_slug(prefix, fields.name, fields.slug)
    violations += _max_length(f"{prefix}.description", fields.description, MAX_DESCRIPTION)
    violations += check_tool_permissions(f"{prefix}.tool_permissions", fields.tool_permissions)
    violations += [
        FieldViolation(f"{prefix}.limits.{name}", f"must be 0 (unlimited) to {MAX_LIMIT}")
        for name, value in fields.limits.set().items()
        if not 0 <= value <= MAX_LIMIT  # NaN too: no comparison holds for it
    ]
    return violations


def check_tool_permissions(field: str, rules: Mapping[str, object]) -> list[FieldViolation]:
    """A rule map's shape: at most MAX_TOOL_RULES rules, each a tool's name or glob pattern of
    1-200 characters without whitespace or control characters (permissions are typed already).
    Each problem names its rule's key."""
    if len(rules) > MAX_TOOL_RULES:
        return [FieldViolation(field, f"must have at most {MAX_TOOL_RULES} rules")]
    violations = []
    for pattern in rules:
        if not 1 <= len(pattern) <= MAX_TOOL_PATTERN:
            problem = f"must be 1-{MAX_TOOL_PATTERN} characters"
        elif has_control_characters(pattern) or any(char.isspace() for char in pattern):
            problem = "must not contain whitespace or control characters"
        else:
            continue
        violations.append(FieldViolation(field, f"key {pattern!r}: a tool's name or pattern {problem}"))
    return violations


def check_agent_name(name: str, *, field: str = "agent.name") -> list[FieldViolation]:
    """An agent's name is display text as people write it ("My PO Agent"): 1-100 characters, no
    control characters, no surrounding whitespace (callers trim it first)."""
    if not name.strip():
        return [FieldViolation(field, "is required")]
    if len(name) > MAX_AGENT_NAME:
        return [FieldViolation(field, f"must be at most {MAX_AGENT_NAME} characters")]
    if has_control_characters(name):
        return [FieldViolation(field, "must not contain control characters")]
    if name != name.strip():
        return [FieldViolation(field, "must not begin or end with whitespace")]
    return []


def check_agent_slug(slug: str, *, field: str = "agent.slug") -> list[FieldViolation]:
    """An agent's slug addresses it in URLs and model ids: a DNS label, unique in its project."""
    if not slug:
        return [FieldViolation(field, "is required (none can be made from the name)")]
    if not is_dns_label(slug):
        return [FieldViolation(field, DNS_LABEL_RULE)]
    return []


def has_control_characters(text: str) -> bool:
    # Unicode category C*: control, format, unassigned, private use and surrogates.
    return any(unicodedata.category(char).startswith("C") for char in text)


def check_agent_config(
    config: AgentConfig,
    *,
    agent_name: str,
    agent_slug: str = "",
    project_agents: Iterable[str],
    prefix: str = "agent.config",
) -> list[FieldViolation]:
    """The config's own shape, and that `network_access` and `sub_agents` name other agents of
    the same project, each by its slug or its exact name (`project_agents`: every slug and name
    in the project)."""
    violations: list[FieldViolation] = []
    if config.instructions is not None:
        violations += _max_length(f"{prefix}.instructions", config.instructions, MAX_PROMPT)
    if config.primary_model is not None:
        if not config.primary_model.strip():
            violations.append(FieldViolation(f"{prefix}.primary_model", "must not be empty when set"))
        violations += _max_length(f"{prefix}.primary_model", config.primary_model, MAX_MODEL_NAME)
    if config.max_steps is not None:
        violations += _range(f"{prefix}.max_steps", config.max_steps, 1, MAX_MAX_STEPS)
    if config.max_iterations is not None:
        violations += _range(f"{prefix}.max_iterations", config.max_iterations, 0, MAX_MAX_ITERATIONS)
    if config.tools is not None:
        violations += _strings(f"{prefix}.tools", config.tools, max_length=MAX_DISPLAY_NAME, unique=True)
    itself = {agent_name, agent_slug} - {""}
    known = set(project_agents)
    for field, names in (("network_access", config.network_access), ("sub_agents", config.sub_agents)):
        if names is None:
            continue
        path = f"{prefix}.{field}"
        shape = _agent_refs(path, names)
        violations += shape
        if shape:
            continue
        if itself & set(names):
            violations.append(FieldViolation(path, f"an agent cannot name itself ({agent_name!r})"))
        unknown = [name for name in dict.fromkeys(names) if name not in known and name not in itself]
        if unknown:
            violations.append(
                FieldViolation(path, f"no agent named {', '.join(map(repr, unknown))} in this project")
            )
    if config.tool_permissions is not None:
        violations += check_tool_permissions(f"{prefix}.tool_permissions", config.tool_permissions)
    if config.double_texting is not None and config.double_texting not in DOUBLE_TEXTING_POLICIES:
        violations.append(
            FieldViolation(f"{prefix}.double_texting", f"must be one of {', '.join(DOUBLE_TEXTING_POLICIES)}")
        )
    if config.mock_responses is not None:
        violations += _shallow(f"{prefix}.mock_responses", config.mock_responses)
        for index, item in enumerate(config.mock_responses):
            if not isinstance(item, str | dict):
                violations.append(
                    FieldViolation(f"{prefix}.mock_responses", f"item {index} must be a string or an object")
                )
    return violations


def _name_and_slug(prefix: str, name: str, slug: str) -> list[FieldViolation]:
    violations = []
    if not name.strip():
        violations.append(FieldViolation(f"{prefix}.name", "is required"))
    violations += _max_length(f"{prefix}.name", name, MAX_DISPLAY_NAME)
    violations += _printable(f"{prefix}.name", name)
    if not slug:
        violations.append(FieldViolation(f"{prefix}.slug", "is required (none can be made from the name)"))
    elif not is_dns_label(slug):
        violations.append(FieldViolation(f"{prefix}.slug", DNS_LABEL_RULE))
    return violations


def _max_length(field: str, value: str, limit: int) -> list[FieldViolation]:
    if len(value) > limit:
        return [FieldViolation(field, f"must be at most {limit} characters")]
    return []


def _printable(field: str, value: str) -> list[FieldViolation]:
    # Control characters (ESC, BEL, newlines) in a name rewrite the terminal or log line that
    # shows it; a surrogate cannot be stored.
    if not value.isprintable():
        return [FieldViolation(field, "must not contain control characters")]
    return []


def _shallow(field: str, value: object) -> list[FieldViolation]:
    if json_depth(value) > MAX_JSON_DEPTH:
        return [
            FieldViolation(field, f"must not nest objects and arrays more than {MAX_JSON_DEPTH} levels deep")
        ]
    return []


def _range(field: str, value: int, low: int, high: int) -> list[FieldViolation]:
    if not low <= value <= high:
        return [FieldViolation(field, f"must be between {low} and {high}")]
    return []


def _strings(field: str, values: list[str], *, max_length: int, unique: bool = False) -> list[FieldViolation]:
    if len(values) > MAX_LIST_ITEMS:
        return [FieldViolation(field, f"must have at most {MAX_LIST_ITEMS} items")]
    for value in values:
        if not value.strip():
            return [FieldViolation(field, "items must not be empty")]
        if len(value) > max_length:
            return [FieldViolation(field, f"items must be at most {max_length} characters")]
    if unique and len(set(values)) != len(values):
        return [FieldViolation(field, "items must be unique")]
    return []


def _agent_refs(field: str, values: list[str]) -> list[FieldViolation]:
    """Agents named by their slug or their exact name."""
    if len(values) > MAX_LIST_ITEMS:
        return [FieldViolation(field, f"must have at most {MAX_LIST_ITEMS} items")]
    for value in values:
        problems = check_agent_name(value, field=field)
        if problems:
            why = problems[0].description
            return [FieldViolation(field, f"{value!r} is not an agent's slug or name: {why}")]
    return []


def _mcp_servers(field: str, servers: list[McpServer]) -> list[FieldViolation]:
    violations = []
    names = [server.name for server in servers]
    if len(set(names)) != len(names):
        violations.append(FieldViolation(field, "names must be unique"))
    if len(servers) > MAX_LIST_ITEMS:
        violations.append(FieldViolation(field, f"must have at most {MAX_LIST_ITEMS} items"))
    for index, server in enumerate(servers):
        path = f"{field}[{index}]"
        if server.is_reference:
            # A registered server's name: it need not exist yet, but must be one it could have.
            if not is_dns_label(server.name):
                violations.append(
                    FieldViolation(f"{path}.name", f"names a registered server: {DNS_LABEL_RULE}")
                )
        else:
            violations += check_mcp_server(server, prefix=path)
    return violations


def check_mcp_server(server: McpServer, *, prefix: str) -> list[FieldViolation]:
    """One server's definition: a name, a known transport and what that transport needs."""
    violations = []
    if not server.name.strip():
        violations.append(FieldViolation(f"{prefix}.name", "is required"))
    violations += _max_length(f"{prefix}.name", server.name, MAX_DISPLAY_NAME)
    if server.transport not in MCP_TRANSPORTS:
        violations.append(
            FieldViolation(f"{prefix}.transport", f"must be one of {', '.join(MCP_TRANSPORTS)}")
        )
    elif server.transport == "stdio" and not server.command.strip():
        violations.append(FieldViolation(f"{prefix}.command", "is required for transport stdio"))
    elif server.transport == "streamable_http" and not server.url.startswith(("http://", "https://")):
        violations.append(
            FieldViolation(f"{prefix}.url", "must be an http(s) URL for transport streamable_http")
        )
    for name, values in (("env", server.env), ("headers", server.headers)):
        if len(values) > MAX_LIST_ITEMS:
            violations.append(
                FieldViolation(f"{prefix}.{name}", f"must have at most {MAX_LIST_ITEMS} entries")
            )
        if any(not key.strip() for key in values):
            violations.append(FieldViolation(f"{prefix}.{name}", "keys must not be empty"))
    return violations


async def refuse_egress(egress: EgressPolicy, url: str, field: str) -> None:
    """INVALID_ARGUMENT naming `field` when the egress policy refuses `url`, a URL a tenant gives
    for the mesh to fetch (checked after the field's own rules, so `url` is well formed)."""
    reason = await egress.refusal(url)
    if reason:
        raise ValidationFailed.of([FieldViolation(field, reason)])
