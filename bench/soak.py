"""Soak: thousands of admission cycles with random submits, cancels, quota edits and faults.

Runs the real loop and reconcile on PostgreSQL and the simulated cluster,
through `FaultyCluster`: cluster calls fail before or after the cluster acts
(503s and timeouts), workers die mid-cycle, the database raises inside a
phase. After every step it checks the promises that hold whatever fails (no
node, team or cluster over its limits; no job with two cluster objects), and
every 25 steps it lets the loop settle on a healthy cluster and checks that
the database and the cluster match one to one and no job was lost.

    .venv/bin/python -m bench.soak [--cycles 2000] [--seed 7] [--short]

The last line reads
`cycles=N faults=N over_admissions=0 lost=0 duplicates=0 p99_cycle_ms=X`.
It uses a database of its own (`--database`, default `gangway_soak`, on the
server DATABASE_URL names), created and migrated on first use and emptied at
each start.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

# Gangway's modules are imported inside the functions that use them: this script sets up
# Django itself, on a database it picks at run time, before any of them may load.

SETTLE_EVERY = 25
SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 4), (2, 8), (3, 2))  # (replicas, GPUs each)


class Clock:
    """Virtual time shared by the simulated cluster and the loop."""

    def __init__(self):
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@contextmanager
def raising_once(module, name: str, error: BaseException):
    """`module.name` raises `error` on its first call while inside the block (a fault in a loop phase)."""
    original = getattr(module, name)
    fired = []

    def stand_in(*args, **kwargs):
        if not fired:
            fired.append(error)
            raise error
        return original(*args, **kwargs)

    setattr(module, name, stand_in)
    try:
        yield fired
    finally:
        setattr(module, name, original)


class Chaos:
    """A small cluster and three teams, driven by random steps; counts faults and broken promises.

    Each public method is one step a test's state machine or the soak loop may take.
    """

    def __init__(self, seed: int, fault_rate: float = 0.3):
        from scheduling.cluster.simulated import SimulatedCluster

        self.random = random.Random(seed)
        self.fault_rate = fault_rate
        self.clock = Clock()
        self.cluster = SimulatedCluster(clock=self.clock, seed=seed, failure_rate=0.05, default_duration=120)
        self.submitted = 0
        self.faults = 0
        self.over_admissions = 0
        self.lost = 0
        self.duplicates = 0
        self.cycles = 0
        self.cycle_ms: list[float] = []
        self.problems: list[str] = []
        self._world()

    def _world(self) -> None:
        from django.contrib.auth import get_user_model

        from scheduling.models import SimNode
        from tenants.models import PriorityTier, Quota, Team

        tiers = [PriorityTier.objects.create(name="production", value=1000, preemptible=False, grace_period=5),
                 PriorityTier.objects.create(name="standard", value=100, grace_period=5),
                 PriorityTier.objects.create(name="experiment", value=10, grace_period=5)]  # fmt: skip
        self.user = get_user_model().objects.create_user("soak")
        self.teams = []
        for slug, gpu in (("maps", 8), ("vision", 8), ("speech", 4)):
            team = Team.objects.create(slug=slug, name=slug.title(), default_tier=tiers[1])
            team.tiers.set(tiers)
            Quota.objects.create(team=team, resource="gpu", nominal=gpu, borrowing_limit=8, max_per_replica=8)
            self.teams.append(team)
        for k in range(3):
            SimNode.objects.create(name=f"node-{k + 1:02d}", gpu=8)

    # -- steps -------------------------------------------------------------------
    def submit(self) -> None:
        from jobs.services import NeverFits, QueueFull, job_submit
        from jobs.spec import parse_spec

        team = self.random.choice(self.teams)
        count, gpu = self.random.choice(SHAPES)
        tier = self.random.choice(("standard", "standard", "experiment", "production"))
        spec = parse_spec({
            "team": team.slug, "name": f"soak-{self.submitted}", "image": "busybox", "tier": tier,
            "replicas": [{"role": "Worker", "count": count, "gpu": gpu}],
            "simulate": {"duration": self.random.randint(10, 400)},
        })  # fmt: skip
        try:
            job_submit(team=team, spec=spec, owner=self.user)
        except (NeverFits, QueueFull):
            return  # R10, or the team's queue is full (MAX_QUEUED_PER_TEAM): refused, nothing stored
        self.submitted += 1

    def cancel(self) -> None:
        from jobs.models import Job
        from jobs.services import job_cancel

        open_jobs = list(Job.objects.exclude(state__in=Job.TERMINAL_STATES).values_list("pk", flat=True))
        if open_jobs:
            job_cancel(job=Job.objects.get(pk=self.random.choice(open_jobs)), actor=self.user)

    def edit_quota(self) -> None:
        """A new nominal and borrowing limit for one team, never below what it holds now: the jobs the database
        counts (`snapshot.UNSTOPPED` too) and those whose objects run in the cluster (`invariants.charged_jobs`),
        each once."""
        from django.db.models import Q

        from jobs.models import Job
        from scheduling.invariants import charged_jobs
        from scheduling.snapshot import UNSTOPPED
        from tenants.services import quota_update

        team = self.random.choice(self.teams)
        held_by = dict(Job.objects.filter(Q(state__in=Job.ACTIVE_STATES) | UNSTOPPED, team=team)
                       .values_list("pk", "gpu_total"))  # fmt: skip
        held_by.update({pk: gpus for pk, (slug, gpus) in charged_jobs(self.cluster.job_statuses()).items()
                        if slug == team.slug})  # fmt: skip
        held = sum(held_by.values())
        nominal = self.random.randint(0, 12)
        limit = max(0, held - nominal) + self.random.randint(0, 8)
        quota_update(team=team, quotas={"gpu": {"nominal": nominal, "borrowing_limit": limit, "lending_limit": None}})

    def tick(self) -> None:
        self.clock.tick(self.random.randint(1, 60))

    def cycle(self) -> None:
        from scheduling.loop import admission_cycle

        self._run(lambda cluster: admission_cycle(cluster=cluster, now=self.clock()), loop_faults=True)

    def reconcile(self) -> None:
        from scheduling.reconcile import reconcile

        self._run(lambda cluster: reconcile(cluster=cluster, now=self.clock()), loop_faults=False)

    def settle(self) -> None:
        """A healthy cluster for a few beats, then the one-to-one check and the count of jobs."""
        from jobs.models import Job
        from scheduling.invariants import check
        from scheduling.loop import admission_cycle
        from scheduling.reconcile import reconcile

        for _ in range(2):
            reconcile(cluster=self.cluster, now=self.clock())
            admission_cycle(cluster=self.cluster, now=self.clock())
            reconcile(cluster=self.cluster, now=self.clock())
        problems = check(self.cluster, settled=True)
        self._count(problems)
        if Job.objects.count() != self.submitted:
            self.lost += abs(self.submitted - Job.objects.count())
            self.problems.append(f"{Job.objects.count()} jobs stored, {self.submitted} submitted")

    # -- faults and checks ---------------------------------------------------------
    def _run(self, step, *, loop_faults: bool) -> None:
        from django.db import DatabaseError

        from scheduling import loop, records
        from scheduling.cluster.base import ClusterError, ClusterUnavailable
        from scheduling.cluster.faulty import CALLS, Fault, FaultyCluster, Killed

        cluster = FaultyCluster(self.cluster)
        phase = None
        if self.random.random() < self.fault_rate:
            if loop_faults and self.random.random() < 0.3:
                target = self.random.choice(((loop, "make_plan"), (loop, "_commit"), (loop, "_apply"),
                                             (loop, "record_waits"), (records, "usage_sample")))  # fmt: skip
                phase = (*target, self.random.choice((Killed("killed"), DatabaseError("connection lost"))))
            else:
                error = self.random.choice((ClusterUnavailable, ClusterUnavailable, Killed, ClusterError))
                call = self.random.choice(CALLS)
                if error is ClusterError:
                    call = "create_job"
                cluster.faults.append(Fault(call, self.random.choice(("before", "after")), error,
                                            nth=self.random.randint(1, 3)))  # fmt: skip
        started = time.perf_counter()
        try:
            if phase is None:
                step(cluster)
            else:
                with raising_once(*phase) as fired:
                    step(cluster)
                self.faults += len(fired)
        except (Killed, DatabaseError, ClusterUnavailable):
            if phase is not None:
                self.faults += 1
        finally:
            self.faults += len(cluster.fired)
        if loop_faults:
            self.cycles += 1
            self.cycle_ms.append((time.perf_counter() - started) * 1000)
        self.check()

    def check(self) -> None:
        from scheduling.invariants import broken_promises

        self._count(broken_promises(self.cluster.nodes(), self.cluster.job_statuses()))

    def _count(self, problems: list[str]) -> None:
        for problem in problems:
            if "cluster objects" in problem:
                self.duplicates += 1
            elif "runs for no admitted job" in problem or "but the cluster has it" in problem:
                self.lost += 1
            else:
                self.over_admissions += 1
        self.problems += problems

    def random_step(self) -> None:
        """One step drawn with the weights of a busy day."""
        self.random.choices(
            (self.submit, self.cancel, self.edit_quota, self.tick, self.cycle, self.reconcile),
            weights=(4, 1, 0.5, 3, 4, 3),
        )[0]()

    def summary(self) -> str:
        ordered = sorted(self.cycle_ms) or [0.0]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (f"cycles={self.cycles} faults={self.faults} over_admissions={self.over_admissions} "
                f"lost={self.lost} duplicates={self.duplicates} p99_cycle_ms={p99:.1f}")  # fmt: skip


def soak(cycles: int, seed: int, *, out=sys.stdout) -> Chaos:
    """Runs random steps until `cycles` admission cycles have run, settling every SETTLE_EVERY steps."""
    import logging

    logging.disable(logging.ERROR)  # thousands of decision and fault lines would drown the figures
    chaos = Chaos(seed)
    steps = 0
    while chaos.cycles < cycles:
        chaos.random_step()
        steps += 1
        if steps % SETTLE_EVERY == 0:
            chaos.settle()
        if steps % 500 == 0:
            print(f"  {chaos.cycles} cycles, {chaos.submitted} jobs, {chaos.faults} faults", file=out, flush=True)
    chaos.settle()
    for problem in chaos.problems[:20]:
        print(f"  broken: {problem}", file=out)
    print(chaos.summary(), file=out)
    return chaos


def _database(name: str) -> None:
    """Points Django at the soak's own database `name`, creating and migrating it when new, then empties it."""
    import dj_database_url
    import psycopg

    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway")
    parsed = dj_database_url.parse(base)
    soak_url = base.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(host=parsed["HOST"], port=parsed["PORT"] or 5432, user=parsed["USER"],
                         password=parsed["PASSWORD"] or None, dbname="postgres", autocommit=True) as admin:  # fmt: skip
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            admin.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = soak_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.test_settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)


def _database_name(value: str) -> str:
    if not value.replace("_", "").isalnum() or not value[:1].isalpha():
        raise argparse.ArgumentTypeError("letters, digits and underscores, starting with a letter")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000, help="admission cycles to run (default 2000)")
    parser.add_argument("--seed", type=int, default=7, help="seed of every random choice (default 7)")
    parser.add_argument("--short", action="store_true", help="150 cycles, for CI")
    parser.add_argument("--database", default="gangway_soak", type=_database_name,
                        help="the PostgreSQL database it empties and uses (default gangway_soak)")
    args = parser.parse_args(argv)
    _database(args.database)
    chaos = soak(150 if args.short else args.cycles, args.seed)
    return 1 if chaos.over_admissions or chaos.lost or chaos.duplicates else 0


if __name__ == "__main__":
    sys.exit(main())
