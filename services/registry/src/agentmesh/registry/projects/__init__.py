"""Projects: the unit of ownership. A project belongs to one user, and everything the registry
keeps besides users — agents, MCP servers, remote agents, project-scoped API keys — lives in one
and is visible to its owner (and superusers) only.

A package of its own rather than a part of `identity/`: identity answers who a caller is (users,
sign-in, API keys), projects what a caller owns. Every other resource checks a project before it
touches its own records and goes when its project is deleted, so projects sit between identity
(a project's owner is a user) and the resources inside them; kept in `identity/`, the API keys
would look up projects in their own package while agents and MCP servers reached into it.
"""
