"""The seeded demo world tells R4's story on the simulated cluster, at the demo's STARVATION_AFTER:
a gang that no node can hold reserves room, smaller jobs backfill around it, and it starts when due.
The story runs on the l4 nodes; beside it, the jobs that name a100 run on the a100 nodes."""

from __future__ import annotations

import re
from datetime import datetime
from io import StringIO
from pathlib import Path

from django.core.management import call_command
from django.test import override_settings

from jobs.models import Job
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import SimNode
from scheduling.reconcile import reconcile
from tenants.models import GPU_TYPE_LABEL, GpuType, Membership, Quota, Team
from tenants.selectors import gpu_types

DEMO_SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "demo.sh"
BEAT = 5  # seconds between beats, as the demo's admission and reconcile intervals
DEMO_MINUTES = 5
L4_NODES = {"node-01", "node-02", "node-03", "node-04"}


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
    # Starving is counted from its queue time, a few seconds before the first beat (R4).
    assert (reserved_at - holder.queued_at).total_seconds() > demo_starvation_after(), "it reserves only once starving"
    assert holder.assigned_gpu_type == "l4" and set(holder.placement) <= L4_NODES, "its team's quota names l4 alone"
    assert backfilled, "no job was admitted while the reservation stood"
    assert admitted_at <= reservation_start, "it starts no later than its reservation said"
    typed = {job.name: (job.assigned_gpu_type, set(job.placement)) for job in Job.objects.exclude(gpu_type=[])}
    assert typed == {"vit-huge-pretrain": ("a100", {"node-05"}), "traffic-llm-finetune": ("a100", {"node-06"})}


def test_the_demo_has_two_gpu_types_labelled_on_its_nodes(db):
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    assert [(t.name, t.value) for t in gpu_types()] == [("l4", "NVIDIA-L4"), ("a100", "NVIDIA-A100-SXM4-80GB")]
    labels = dict(SimNode.objects.values_list("name", "labels"))
    assert {name for name, node_labels in labels.items() if node_labels == {GPU_TYPE_LABEL: "NVIDIA-L4"}} == L4_NODES
    assert {name for name, node_labels in labels.items()
            if node_labels == {GPU_TYPE_LABEL: "NVIDIA-A100-SXM4-80GB"}} == {"node-05", "node-06"}
    gpu = {(slug, resource): nominal for slug, resource, nominal in
           Quota.objects.filter(resource__startswith="gpu").values_list("team__slug", "resource", "nominal")}
    assert gpu == {("finance", "gpu:l4"): 8, ("perception", "gpu:l4"): 12, ("maps", "gpu:l4"): 8,
                   ("research", "gpu:l4"): 4, ("perception", "gpu:a100"): 8, ("maps", "gpu:a100"): 8}


def test_it_upgrades_a_demo_seeded_before_gpu_types(db):
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    # The demo as it was: no types, four unlabelled nodes, quotas of `gpu`, no typed jobs.
    GpuType.objects.all().delete()
    SimNode.objects.filter(name__in=["node-05", "node-06"]).delete()
    SimNode.objects.update(labels={})
    Quota.objects.filter(resource="gpu:a100").delete()
    Quota.objects.filter(resource="gpu:l4").update(resource="gpu")
    Quota.objects.filter(team__slug="maps", resource="gpu").update(nominal=6)  # an admin's change
    Job.objects.exclude(gpu_type=[]).delete()
    before = Job.objects.count()

    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "(8 rows created)" in out.getvalue()  # 2 types, 2 a100 nodes, 2 a100 quotas, 2 typed jobs
    assert not Quota.objects.filter(resource="gpu").exists()
    assert Quota.objects.get(team__slug="maps", resource="gpu:l4").nominal == 6
    assert Quota.objects.get(team__slug="maps", resource="gpu:a100").nominal == 8
    assert SimNode.objects.get(name="node-01").labels == {GPU_TYPE_LABEL: "NVIDIA-L4"}
    assert Job.objects.count() == before + 2


def test_every_demo_team_has_members_and_its_seeded_jobs_are_theirs(db):
    """A team page that lists no members beside jobs owned by someone reads as a contradiction."""
    call_command("seed_demo", stdout=StringIO())
    for team in Team.objects.all():
        members = set(Membership.objects.filter(team=team).values_list("user__username", flat=True))
        owners = set(Job.objects.filter(team=team, owner__isnull=False).values_list("owner__username", flat=True))
        assert members, f"team {team.slug} has no members"
        assert owners <= members, f"team {team.slug}'s jobs are owned by {sorted(owners - members)}, not members"


def test_the_demos_traffic_shows_a_reclaim_within_minutes(db, clock, settings, monkeypatch):
    """After the seeded story, people go on submitting (demo_traffic, one look every 40 s): within a quarter of
    an hour a team takes back the nominal quota another borrowed, and the borrower is preempted (R6). The
    submissions' times follow the clock, as in the demo, where both are the wall's."""
    from django.utils import timezone

    from jobs.models import JobEvent
    from scheduling import demo_traffic

    monkeypatch.setattr(timezone, "now", clock)
    settings.STARVATION_AFTER, settings.CLUSTER_BACKEND = demo_starvation_after(), "simulated"
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    cluster = SimulatedCluster(clock=clock, seed=1, failure_rate=0)
    start = clock()
    while not JobEvent.objects.filter(kind="preempted").exists():
        assert (clock() - start).total_seconds() <= 15 * 60, "nobody was preempted in a quarter of an hour"
        if (clock() - start).total_seconds() % 40 < BEAT:
            demo_traffic.look(clock())
        reconcile(cluster=cluster, now=clock())
        admission_cycle(cluster=cluster, now=clock())
        clock.tick(BEAT)
    event = JobEvent.objects.filter(kind="preempted").first()
    # Finance's quarter-close, as a rule; another team's job may come first (job ids break R3's ties).
    assert event.code == "reclaimed" and "which is reclaiming its nominal quota" in event.message, event.message
