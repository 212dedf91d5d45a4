"""`agentmesh apply -f FILE.yaml`: agent types, projects and agents declared in a file, made so in
the registry — what is missing is created, what differs is updated, the rest is left alone.

Three stages, so that a bad file or a conflict changes nothing, each its own module:

1. **load** (`document`, no server needed): the YAML is parsed and every entry validated against
   the file format (pydantic models that forbid unknown fields) and turned into the registry's v1
   messages; errors name their place in the file, e.g. `projects[0].agents[1].config.network_access`.
2. **plan** (`plan`, reads only): the registry's current state is read and compared with the
   file. The registry's own validation rules (which its client offers for exactly this) run on
   every object that would be written, references are resolved (an agent's type exists and is
   active, `network_access` and `sub_agents` name agents of the project, an existing agent keeps
   its type), and agent types to write need a superuser. Any problem stops here, before the first
   write, with all problems listed.
3. **execute** (`execute`): agent types, then projects, then agents. A new agent is created
   without the references (`network_access`, `sub_agents`) to agents that do not exist yet; once
   every agent of the file exists, one update per such agent sets them. The registry checks every
   write again and stays the authority: a refused write names the entry and its field.

`render` prints the summary and the problems; `command` is the typer command. The CLI reaches the
registry only through `agentmesh.registry.client` and its v1 messages. The format is documented in
docs/apply.md.
"""
