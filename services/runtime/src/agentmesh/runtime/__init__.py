"""Shared plumbing that knows no service: server bootstrap, interceptors, errors, telemetry,
database, settings, identity, logging and pagination."""
