"""Whose data a call may read or change: one user, or admin. Required, never defaulted.

Every runtime and store read or write takes a :class:`Scope` as an explicit argument. There
is no ``None`` that quietly means "everyone": a route handler that forgets the argument gets
a ``TypeError``, not admin access. A user scope sees only that user's Sessions, Tasks,
Actions and journal; another user's ids look exactly like ids that do not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ScopeError


@dataclass(frozen=True)
class Scope:
    """A user (``Scope.user("alice")``) or an operator (``Scope.admin("cli")``).

    ``actor`` names who acts, for the journal: ``user:alice``, ``admin:cli``.
    """

    user_id: str | None
    is_admin: bool = False
    by: str = ""

    def __post_init__(self) -> None:
        if self.is_admin:
            if self.user_id is not None:
                raise ScopeError("an admin scope is not tied to a user")
            if not self.by:
                raise ScopeError("an admin scope names who acts, e.g. Scope.admin('cli')")
        elif not isinstance(self.user_id, str) or not self.user_id:
            raise ScopeError("a user scope needs a non-empty user id")

    @classmethod
    def user(cls, user_id: str) -> Scope:
        return cls(user_id)

    @classmethod
    def admin(cls, by: str) -> Scope:
        return cls(None, True, by)

    @property
    def actor(self) -> str:
        return f"admin:{self.by}" if self.is_admin else f"user:{self.user_id}"

    def admits(self, owner_id: str) -> bool:
        """Whether data owned by ``owner_id`` is visible in this scope."""
        return self.is_admin or owner_id == self.user_id

    def owner(self, what: str) -> str:
        """The user a new record (a session, a task) belongs to; admin owns nothing."""
        if self.user_id is None:
            raise ScopeError(f"{what} belongs to a user: use that user's scope, not admin")
        return self.user_id

    def require_admin(self, what: str) -> None:
        if not self.is_admin:
            raise ScopeError(f"{what} needs an admin scope")


def checked(scope: object) -> Scope:
    """The scope itself; a TypeError for anything else (``None``, a bare user id...)."""
    if not isinstance(scope, Scope):
        raise TypeError(
            f"a Scope is required (Scope.user(user_id) or Scope.admin(by)), "
            f"not {type(scope).__name__}"
        )
    return scope
