"""The schema role: an opened store is at the latest version and has nothing left to apply."""

from __future__ import annotations

import pytest

from ..store import SchemaAdmin, Stores
from .fixtures import Conformance, required


class SchemaRoleTests(Conformance):
    """A store that migrates its own schema: opened, it is up to date."""

    @pytest.fixture
    def schema(self, bundle: Stores) -> SchemaAdmin:
        return required(bundle.schema, "schema")

    def test_an_opened_store_is_up_to_date(self, schema: SchemaAdmin) -> None:
        status = schema.schema_status()
        assert status.up_to_date and not status.too_new and status.pending == ()
        assert status.current == status.latest >= 1
        assert schema.upgrade_schema() == []
        assert schema.schema_status() == status
