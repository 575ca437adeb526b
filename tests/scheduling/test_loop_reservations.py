"""The loop keeps R4's reservations, R14's learned runtimes and R8's checkpoints in the database."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import override_settings

from jobs.models import Job, JobEvent
from jobs.spec import parse_spec
from scheduling.preview import fit_preview
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from scheduling.selectors import expected_runtime_of
from scheduling.snapshot import build_world, learned_runtimes
from tests.conftest import spec_data

HALF = [{"role": "Worker", "count": 1, "gpu": 4}]
BIG = [{"role": "Chief", "count": 1, "gpu": 8}, {"role": "Worker", "count": 1, "gpu": 4}]


def beat(cluster, clock):
    reconcile(cluster=cluster, now=clock())
    return admission_cycle(cluster=cluster, now=clock())


@pytest.fixture
def reserving(submit, cluster, clock, vision, outsider, maps, settings):
    """maps' gang `big` (8 + 4 GPUs) starves and reserves both nodes while maps' `mine` (4 GPUs, 600 s)
    and vision's `theirs` (4 GPUs, 1200 s) run; returns (mine, theirs, big)."""
    settings.STARVATION_AFTER = 60
    maps.quotas.filter(resource="gpu").update(nominal=12, borrowing_limit=4)
    mine = submit(name="mine", replicas=HALF, max_runtime=600, simulate={"duration": 600})
    theirs = submit(team=vision, user=outsider, name="theirs", replicas=HALF, max_runtime=1200,
                    simulate={"duration": 1200})
    beat(cluster, clock)
    big = submit(name="big", replicas=BIG)
    # Past STARVATION_AFTER with seconds to spare: big queues at the wall clock's time, which runs
    # ahead of the hand-moved clock by however long the first beat took.
    clock.tick(65)
    beat(cluster, clock)
    big.refresh_from_db()
    return mine, theirs, big


def test_a_starving_gang_reserves_room_and_keeps_it_and_a_short_job_backfills(reserving, submit, cluster, clock):
    mine, theirs, big = reserving
    assert big.reason_code == "reserving", big.reason
    assert big.reservation["placement"] == {"node-01": 1, "node-02": 1}
    assert "t=" not in big.reason and "from about" in big.reason
    assert big.eta == clock() + timedelta(seconds=600), "its start is when mine ends (seen running just now)"
    assert f"#{mine.pk} is due to end" in big.reason, big.reason
    assert f"#{theirs.pk}" not in big.reason, "another team's job is named by its team only"

    late = submit(name="late", replicas=HALF)  # no max_runtime: it would sit on reserved room
    short = submit(name="short", replicas=[{"role": "Worker", "count": 1, "gpu": 2}], max_runtime=120,
                   simulate={"duration": 100})
    beat(cluster, clock)
    late.refresh_from_db()
    assert late.state == "queued" and late.reason_code == "reserved_room", late.reason
    assert "max_runtime of at most" in late.reason and " s lets" not in late.reason
    assert Job.objects.get(pk=short.pk).state == "admitted", "it ends before the reservation starts"
    big.refresh_from_db()
    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[])
    assert [held.id for held in world.snapshot.reservations] == [str(big.pk)], "the next snapshot carries it"


def test_the_fit_preview_says_why_reserved_room_is_not_for_it_as_the_job_page_will(reserving, vision, clock,
                                                                                    monkeypatch):
    *_, big = reserving
    monkeypatch.setattr("django.utils.timezone.now", clock)  # the preview plans at the cycles' time
    spec = parse_spec(spec_data(team="vision", name="later", replicas=[{"role": "Worker", "count": 1, "gpu": 8}]))
    preview = fit_preview(team=vision, spec=spec, tier=vision.default_tier)
    assert preview.code == "reserved_room", preview.message
    assert "a job of team maps" in preview.message
    assert f"#{big.pk}" not in preview.message and f"job {big.pk}" not in preview.message
    assert "from about " in preview.message and "t=" not in preview.message
    assert re.search(r"max_runtime of at most \d+ min", preview.message), preview.message


def test_learned_runtimes_are_the_median_of_the_latest_successes(submit, clock):
    def ran(seconds):
        job = submit(name="r", replicas=HALF)
        Job.objects.filter(pk=job.pk).update(state="succeeded", started_at=clock(),
                                             finished_at=clock() + timedelta(seconds=seconds))
        clock.tick(seconds)

    ran(100)
    group = Job.objects.values_list("team_id", "kind", "gpu_total").first()
    assert learned_runtimes([group]) == {}, "one success is not enough"
    for seconds in (300, 200, 10_000, 400, 500):
        ran(seconds)
    assert learned_runtimes([group]) == {group: 400}, "the median of the latest 5: 300, 200, 10000, 400, 500"
    with override_settings(DEFAULT_RUNTIME=350):
        assert learned_runtimes([group]) == {group: 350}, "capped at the default runtime"
    assert learned_runtimes([(group[0], group[1], 8)]) == {}, "another GPU count is another group"
    assert learned_runtimes([]) == {}


def test_a_group_learns_from_its_own_latest_successes_however_many_others_succeeded_since(submit, clock):
    """The loop once read only the latest 5,000 successes of the whole cluster: a group whose
    successes were older than that fell back to the default runtime while the job page said
    "learned". Both read each group's latest successes now."""
    old = [submit(name="old", replicas=HALF) for _ in range(2)]
    Job.objects.filter(pk__in=[job.pk for job in old]).update(
        state="succeeded", started_at=clock() - timedelta(days=30), finished_at=clock() - timedelta(days=30, seconds=-700))
    busy = submit(name="busy", replicas=[{"role": "Worker", "count": 1, "gpu": 1}])
    Job.objects.bulk_create([
        Job(team_id=busy.team_id, tier_id=busy.tier_id, owner_id=busy.owner_id, name=f"busy-{n}", kind=busy.kind,
            image=busy.image, replicas=busy.replicas, gpu_total=1, state="succeeded", queued_at=clock(),
            started_at=clock(), finished_at=clock() + timedelta(seconds=60))
        for n in range(5001)
    ])
    waiting = submit(name="waiting", replicas=HALF)
    world = build_world(now=clock(), nodes=[], outside=[])
    assert learned_runtimes([(waiting.team_id, waiting.kind, 4)]) == {(waiting.team_id, waiting.kind, 4): 700}
    assert next(job for job in world.snapshot.pending if job.id == str(waiting.pk)).estimate == 700
    expected = expected_runtime_of(waiting)
    assert (expected.seconds, expected.source, expected.runs) == (700, "learned", 2), "the page says what the loop uses"


def test_running_jobs_carry_their_last_checkpoint_into_the_snapshot(submit, cluster, clock):
    job = submit(simulate={"duration": 600})
    beat(cluster, clock)
    Job.objects.filter(pk=job.pk).update(checkpointed_at=clock())
    world = build_world(now=clock(), nodes=cluster.nodes(), outside=[])
    (running,) = world.snapshot.running
    assert running.checkpointed == int(clock().timestamp())


def test_reserved_gpus_are_hatched_on_the_node_map_and_counted_in_metrics(submit, client, vision, outsider):
    from scheduling.models import ClusterNode
    from django.utils import timezone

    for position, name in enumerate(("node-01", "node-02")):
        ClusterNode.objects.create(name=name, position=position, gpu=8, seen_at=timezone.now())
    big = submit(name="big", replicas=BIG)
    Job.objects.filter(pk=big.pk).update(reservation={
        "start": timezone.now().isoformat(), "placement": {"node-01": 1, "node-02": 1}, "nodes": ["node-01", "node-02"]})
    client.force_login(outsider)
    page = client.get("/").content.decode()
    assert page.count('class="reserved"') == 2 and "Reserved for a job of team maps" in page
    assert "12 of them kept by reservations for starving jobs" in page  # the GPUs free tile
    assert "big" not in page.split('class="nodes"')[1].split("</section>")[0], "another team's job name stays hidden"
    metrics = client.get("/metrics").content.decode()
    assert 'gangway_reserved_gpus{team="maps"} 12.0' in metrics


def test_a_reservation_that_moves_is_said_on_the_timeline_once(reserving, cluster, clock):
    *_, big = reserving
    waits = big.events.filter(kind=JobEvent.Kind.WAITING)
    said = waits.count()
    beat(cluster, clock)
    assert waits.count() == said, "kept where it was: nothing new to say"
    # As if the last cycle had reserved a node the cluster has lost since: this cycle reserves elsewhere.
    Job.objects.filter(pk=big.pk).update(reservation={**big.reservation, "placement": {"node-09": 2},
                                                      "nodes": ["node-09", "node-09"]})
    beat(cluster, clock)
    big.refresh_from_db()
    assert big.reservation["placement"] == {"node-01": 1, "node-02": 1}
    assert waits.count() == said + 1 and waits.last().message == big.reason
    beat(cluster, clock)
    assert waits.count() == said + 1
