"""The seeded demo world tells R4's story on the simulated cluster, at the demo's STARVATION_AFTER:
a gang that no node can hold reserves room, smaller jobs backfill around it, and it starts when due."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from django.core.management import call_command
from django.test import override_settings

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile

DEMO_SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "demo.sh"
BEAT = 5  # seconds between beats, as the demo's admission and reconcile intervals
DEMO_MINUTES = 5


def demo_starvation_after() -> int:
    """Returns the STARVATION_AFTER default deploy/demo.sh exports."""
    found = re.search(r'STARVATION_AFTER="\$\{STARVATION_AFTER:-(\d+)\}"', DEMO_SCRIPT.read_text())
    assert found, "deploy/demo.sh sets no STARVATION_AFTER default"
    return int(found.group(1))


def test_the_demo_script_starves_jobs_within_minutes():
    assert 60 <= demo_starvation_after() <= 120


def test_the_seeded_gang_reserves_room_others_backfill_and_it_starts_when_due(db, clock):
    with override_settings(STARVATION_AFTER=demo_starvation_after()):
        call_command("seed_demo", stdout=open("/dev/null", "w"))
        cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
        start = clock()
        holder: Job | None = None
        reserved_at = reservation_start = None
        backfilled: list[str] = []
        queued = set(Job.objects.filter(state=Job.State.QUEUED).values_list("pk", flat=True))
        while holder is None or holder.state == Job.State.QUEUED:
            assert (clock() - start).total_seconds() <= DEMO_MINUTES * 60, (
                f"no reservation within {DEMO_MINUTES} min" if holder is None else f"#{holder.pk} never started")
            reconcile(cluster=cluster, now=clock())
            admission_cycle(cluster=cluster, now=clock())
            if holder is None:
                holder = Job.objects.filter(reason_code="reserving").first()
                if holder is not None:
                    assert holder.reservation, "a reserving job carries its reservation"
                    reserved_at = clock()
                    reservation_start = datetime.fromisoformat(holder.reservation["start"])
            else:
                holder.refresh_from_db()
                if holder.state == Job.State.QUEUED:
                    assert holder.reason_code == "reserving", holder.reason
                    backfilled += Job.objects.filter(pk__in=queued).exclude(state=Job.State.QUEUED).exclude(
                        pk=holder.pk).values_list("name", flat=True)  # fmt: skip
            queued = set(Job.objects.filter(state=Job.State.QUEUED).values_list("pk", flat=True))
            admitted_at = clock()
            clock.tick(BEAT)

    assert holder.name == "llm-compliance-eval" and holder.replica_count == 1
    assert (reserved_at - start).total_seconds() >= demo_starvation_after(), "it reserves only once starving"
    assert backfilled, "no job was admitted while the reservation stood"
    assert admitted_at <= reservation_start, "it starts no later than its reservation said"
