"""Every agent as an A2A v1.0 server (docs/a2a.md): the card, the task core and its request handler."""
