"""What a password must be when it is set (registration, a superuser creating a user, the
bootstrap superuser): long enough and not one of the most common passwords. Passwords set before
a stricter policy keep working: sign-in never checks the policy, only setting a password does.

The common passwords ship with the registry (`common_passwords.txt`: its header says where they
come from and under which licence), read once on first use; nothing is fetched at run time.
"""

from __future__ import annotations

import functools
from importlib import resources

from agentmesh.runtime.errors import FieldViolation

MAX_PASSWORD = 1024
DEFAULT_MIN_LENGTH = 12
_COMMON_PASSWORDS = "common_passwords.txt"


@functools.cache
def common_passwords() -> frozenset[str]:
    """The shipped list, lower-cased. Its header lines are "#" alone or "# " and text; entries
    may begin with "#" otherwise (a few real ones do)."""
    text = resources.files(__package__).joinpath(_COMMON_PASSWORDS).read_text(encoding="utf-8")
    return frozenset(
        line.strip().lower()
        for line in text.splitlines()
        if line.strip() and line != "#" and not line.startswith("# ")
    )


class PasswordPolicy:
    """Checks a new password: at least `min_length` characters, at most MAX_PASSWORD, and not in
    the common list (compared ignoring case and surrounding spaces, so `Password123456` is as
    common as `password123456`). Violations never echo the password."""

    def __init__(self, *, min_length: int = DEFAULT_MIN_LENGTH) -> None:
        self.min_length = min_length

    def check(self, password: str, *, field: str = "password") -> list[FieldViolation]:
        if len(password) < self.min_length:
            return [FieldViolation(field, f"must be at least {self.min_length} characters")]
        if len(password) > MAX_PASSWORD:
            return [FieldViolation(field, f"must be at most {MAX_PASSWORD} characters")]
        if password.strip().lower() in common_passwords():
            return [FieldViolation(field, "is one of the most common passwords: choose another")]
        return []
