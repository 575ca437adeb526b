"""A state machine of submits, cancels, quota edits, cycles, reconciles and injected faults.

After every step the promises that hold whatever fails are checked; whenever
hypothesis chooses, the loop settles on a healthy cluster and the database and
the cluster must match one to one with no job lost. The soak benchmark runs the
same steps thousands of times; its short mode runs here too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from hypothesis import strategies as st

from bench.soak import Chaos

ROOT = Path(__file__).resolve().parents[2]


def _drop(database: str) -> None:
    import dj_database_url
    import psycopg

    parsed = dj_database_url.parse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway"))
    with psycopg.connect(host=parsed["HOST"], port=parsed["PORT"] or 5432, user=parsed["USER"],
                         password=parsed["PASSWORD"] or None, dbname="postgres", autocommit=True) as admin:  # fmt: skip
        admin.execute(f'DROP DATABASE IF EXISTS "{database}"')


class LoopUnderFaults(RuleBasedStateMachine):
    chaos: Chaos

    @initialize(seed=st.integers(0, 10_000))
    def start(self, seed):
        from jobs.models import Job
        from scheduling.models import Cycle, SimJob, SimNode
        from tenants.models import PriorityTier, Team
        from django.contrib.auth import get_user_model

        # Each example starts from an empty world inside the test's transaction.
        for model in (SimJob, Cycle, Job, Team, PriorityTier, SimNode):
            model.objects.all().delete()
        get_user_model().objects.filter(username="soak").delete()
        self.chaos = Chaos(seed, fault_rate=0.5)

    @rule()
    def submit(self):
        self.chaos.submit()

    @rule()
    def cancel(self):
        self.chaos.cancel()

    @rule()
    def edit_quota(self):
        self.chaos.edit_quota()

    @rule()
    def tick(self):
        self.chaos.tick()

    @rule()
    def cycle(self):
        self.chaos.cycle()

    @rule()
    def reconcile(self):
        self.chaos.reconcile()

    @rule()
    def settle(self):
        self.chaos.settle()

    @invariant()
    def nothing_broken(self):
        if hasattr(self, "chaos"):
            assert self.chaos.problems == []


@pytest.mark.django_db
def test_the_loop_keeps_its_promises_under_any_sequence_of_faults():
    machine = settings(max_examples=12, stateful_step_count=30, deadline=None,
                       suppress_health_check=list(HealthCheck))(LoopUnderFaults)  # fmt: skip
    machine.TestCase().runTest()


def test_the_soak_benchmark_short_mode_finds_nothing_broken():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    database = f"test_gangway_soak_{os.getpid()}"
    try:
        done = subprocess.run([sys.executable, "-m", "bench.soak", "--short", "--database", database], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    finally:
        _drop(database)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = dict(pair.split("=") for pair in last.split())
    assert int(figures["cycles"]) >= 150 and int(figures["faults"]) > 0
    assert (figures["over_admissions"], figures["lost"], figures["duplicates"]) == ("0", "0", "0")
