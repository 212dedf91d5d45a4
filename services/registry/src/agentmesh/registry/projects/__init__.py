"""Projects: the unit of ownership. A project belongs to one user, and everything the registry
keeps besides users — agents, MCP servers, remote agents, project-scoped API keys — lives in one,
seen by its owner (and superusers) only, and goes when it is deleted. The rules are `registry.py`
(with `visible_project`, the check every resource inside a project applies), the RPC handlers
`servicer.py`, the store part `store.py`.

A package of its own rather than a part of `identity/`: identity answers who a caller is (users,
sign-in, API keys), projects what a caller owns, and the two point different ways. Agents and
remote agents need projects but not sign-in; identity's API keys need projects (a scoped key's
project must be visible). In `identity/`, the agents' rules would depend on the account rules'
package, and the package would both sit under the agents (projects) and over them (its servicer).
"""
