"""Idempotency keys are stable across processes; retry backoff is what the policy says."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from datetime import timedelta

import pytest

from relaystate import Retry, idempotency_key
from relaystate.actions.idempotency import canonical_json

INPUT = {"b": [1, 2, {"z": "上海", "a": None}], "a": 1.5}


def test_keys_do_not_depend_on_dict_order() -> None:
    reordered = {"a": 1.5, "b": [1, 2, {"a": None, "z": "上海"}]}
    assert idempotency_key("t", 2, "pay", INPUT) == idempotency_key("t", 2, "pay", reordered)
    assert canonical_json(INPUT) == canonical_json(reordered)
    assert idempotency_key("t", 2, "pay", INPUT) != idempotency_key("t", 3, "pay", INPUT)
    assert idempotency_key("t", 2, "pay", INPUT) != idempotency_key("t", 2, "pay", {"a": 2})
    assert idempotency_key("t", 2, "pay", INPUT).startswith("t:2:pay:")


def test_keys_are_the_same_in_other_processes_with_other_hash_seeds() -> None:
    code = (
        "from relaystate import idempotency_key; import json, sys;"
        "print(idempotency_key('t', 2, 'pay', json.loads(sys.argv[1])))"
    )
    import json

    keys = {
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(INPUT)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert keys == {idempotency_key("t", 2, "pay", INPUT)}


def test_backoff_grows_and_is_capped() -> None:
    policy = Retry(max_attempts=5, initial_interval=0.5, multiplier=2, max_interval=3)
    assert [policy.delay(n).total_seconds() for n in range(1, 6)] == [0.5, 1, 2, 3, 3]
    assert policy.can_retry(4) and not policy.can_retry(5)
    assert not Retry(max_attempts=1).can_retry(1)


def test_jitter_stays_within_its_fraction() -> None:
    policy = Retry(initial_interval=10, jitter=0.2)
    rng = random.Random(7)
    delays = [policy.delay(1, rng) for _ in range(200)]
    assert all(timedelta(seconds=8) <= d <= timedelta(seconds=12) for d in delays)
    assert len(set(delays)) > 100


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"initial_interval": -1},
        {"multiplier": 0.5},
        {"jitter": 2},
    ],
)
def test_bad_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Retry(**bad)  # type: ignore[arg-type]
