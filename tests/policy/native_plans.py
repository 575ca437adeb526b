"""Digests of the plans of seeded snapshots, the same in every process: run
under the compiled and the interpreted policy, they must agree
(test_policy_native.py). `python -m tests.policy.native_plans` prints them as
JSON, with which policy made them."""

from __future__ import annotations

import hashlib
import json
import random
import sys

from bench.policy_bench import build
from scheduling.policy import Snapshot, native, plan, plan_to_dict
from tests.policy.random_snapshots import cordon_some, typed_snapshot
from tests.policy.test_policy_properties import TIERS, small_snapshot

SMALL, TYPED = 300, 100
# (pending jobs, seed, queue age, guard, GPU types) of the policy bench's busy
# cluster: most of the queue starving (7200) or every job trying backfill and
# preemption (1700).
BUSY = [(n, seed, age, guard, types)
        for n, seed in ((300, 1), (1500, 7))
        for age in (1700, 7200)
        for guard, types in (("reserve", 0), ("hold", 0), ("reserve", 2))]


def cases() -> list[tuple[str, Snapshot]]:
    """Returns the snapshots compared, each with a name that says how it was made."""
    made = []
    for seed in range(SMALL):
        snapshot = small_snapshot(random.Random(seed))
        if seed % 3 == 0:
            snapshot = cordon_some(random.Random(seed), snapshot)
        made.append((f"small {seed}", snapshot))
    for seed in range(TYPED):
        made.append((f"typed {seed}", typed_snapshot(random.Random(seed), TIERS, 2 + seed % 2)))
    for n, seed, age, guard, types in BUSY:
        made.append((f"busy {n} seed {seed} age {age} {guard} types {types}",
                     build(n, seed, age, guard, types)))
    return made


def digests() -> dict[str, str]:
    """Returns, per case and with or without estimated starts, a digest of its plan."""
    out = {}
    for name, snapshot in cases():
        for with_eta in (False, True):
            made = plan(snapshot, with_eta=with_eta)
            # The plan as the loop reads it, and whole (admissions in order, with their nodes).
            text = json.dumps(plan_to_dict(made), sort_keys=True) + repr(made)
            out[f"{name} eta {with_eta}"] = hashlib.sha256(text.encode()).hexdigest()
    return out


if __name__ == "__main__":
    json.dump({"compiled": native.LOADED, "plans": digests()}, sys.stdout)
