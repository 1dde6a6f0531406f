"""The coordination role: who works on what (workers, recovery claims)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ..model import WorkerInfo
from ..store import Coordination, Stores
from .fixtures import Conformance
from .records import T0, create, new_task


def worker(worker_id: str) -> WorkerInfo:
    return WorkerInfo(worker_id, "host", 1, "b1", T0)


class CoordinationRoleTests(Conformance):
    """Workers and recovery claims: registered, split between recoverers, taken over when a
    holder is gone."""

    @pytest.fixture
    def coordination(self, bundle: Stores) -> Coordination:
        return bundle.coordination

    def test_workers_register_and_deregister(self, coordination: Coordination) -> None:
        coordination.register_worker(worker("w1"))
        coordination.register_worker(worker("w2"))
        assert coordination.stopped_workers(["w1", "w2", "w3"]) == frozenset()
        coordination.deregister_worker(worker("w1"), T0)
        assert coordination.stopped_workers(["w1", "w2", "w3"]) == frozenset({"w1"})
        coordination.deregister_worker(worker("never-registered"), T0)
        assert coordination.stopped_workers(["never-registered"]) == frozenset({"never-registered"})
        assert coordination.stopped_workers([]) == frozenset()
        coordination.register_worker(worker("w1"))  # the same id registering again is alive again
        assert coordination.stopped_workers(["w1"]) == frozenset()

    def test_recovery_claims_split_work_and_expire(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        later = T0 + timedelta(minutes=1)
        ids = ["t0", "t1", "t2", "t3"]
        for task_id in ids:  # claims are taken on tasks that exist
            create(bundle, new_task(task_id))
        claim = coordination.claim_for_recovery
        assert claim(ids[:2], "a", until=later, now=T0) == ["t0", "t1"]
        assert claim(ids, "b", until=later, now=T0) == ["t2", "t3"]
        assert claim(ids, "a", until=later, now=T0) == ["t0", "t1"]  # mine again
        assert claim(ids, "c", until=later, now=later) == ids  # all expired
        coordination.release_recovery("c")
        assert claim(ids, "b", until=later, now=T0) == ids
        assert claim([], "b", until=later, now=T0) == []

    def test_claims_of_a_recoverer_known_dead_are_taken_over(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        later = T0 + timedelta(minutes=1)
        for task_id in ("t0", "t1"):
            create(bundle, new_task(task_id))
        claim = coordination.claim_for_recovery
        assert claim(["t0", "t1"], "dead", until=later, now=T0) == ["t0", "t1"]
        assert coordination.recovery_claimants(T0) == frozenset({"dead"})
        assert claim(["t0", "t1"], "b", until=later, now=T0) == []  # alive as far as we know
        assert claim(["t0", "t1"], "b", until=later, now=T0, gone={"dead"}) == ["t0", "t1"]
        assert coordination.recovery_claimants(T0) == frozenset({"b"})
        assert coordination.recovery_claimants(later) == frozenset()  # expired by time
