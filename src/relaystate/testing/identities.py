"""The identity role: API keys by id, their user and a hash, revocable, never lost."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ..model import ApiKey
from ..store import Identities, Stores
from .fixtures import Conformance, required
from .records import T0


def key(key_id: str, user: str = "alice", *, admin: bool = False, minutes: int = 0) -> ApiKey:
    return ApiKey(key_id, user, f"{user}'s key", admin, "ab" * 32, T0 + timedelta(minutes=minutes))


class IdentityRoleTests(Conformance):
    """API keys: stored by id, listed, revoked."""

    @pytest.fixture
    def identities(self, bundle: Stores) -> Identities:
        return required(bundle.identities, "identities")

    def test_keys_are_stored_found_by_id_and_listed(self, identities: Identities) -> None:
        identities.add_key(key("k1"))
        identities.add_key(key("k2", "bob", admin=True, minutes=1))
        identities.add_key(key("k3", minutes=2))
        assert identities.get_key("k2") == key("k2", "bob", admin=True, minutes=1)
        assert identities.get_key("nope") is None
        assert [k.id for k in identities.list_keys()] == ["k1", "k2", "k3"]
        assert [k.id for k in identities.list_keys("alice")] == ["k1", "k3"]
        assert identities.list_keys("carol") == []

    def test_revoking_one_key_or_a_users_keys(self, identities: Identities) -> None:
        for k in (key("k1"), key("k2", minutes=1), key("k3", "bob", minutes=2)):
            identities.add_key(k)
        later = T0 + timedelta(hours=1)
        assert identities.revoke_keys(at=later, key_id="k1") == 1
        assert identities.revoke_keys(at=later, key_id="k1") == 0  # already revoked
        k1 = identities.get_key("k1")
        assert k1 is not None and not k1.active and k1.revoked_at == later
        assert identities.revoke_keys(at=later, user_id="alice") == 1  # k2; k1 was already
        bob = identities.get_key("k3")
        assert bob is not None and bob.active
        assert identities.revoke_keys(at=later) == 0  # neither given: nothing at all
