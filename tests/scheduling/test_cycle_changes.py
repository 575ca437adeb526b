"""A cycle's row says whether the cycle changed something a page shows (records.cycle_done): the
polled parts' version moves with those cycles only, and a steady queue's cycles leave it be."""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from jobs.models import Job
from scheduling import records
from scheduling.cluster.base import ClusterUnavailable
from scheduling.loop import admission_cycle
from scheduling.models import Cycle, SimNode
from scheduling.selectors import live_version

pytestmark = pytest.mark.django_db


class Down:
    """A cluster that cannot be reached."""

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise ClusterUnavailable("connection refused")

        return fail


def changed() -> bool:
    return Cycle.objects.order_by("-id").values_list("changed", flat=True).first()


def test_a_cycle_that_admits_changes_something_and_the_steady_ones_after_it_do_not(submit, cycle):
    submit(name="fits", replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    assert cycle().admitted == 1 and changed()
    cycle()  # it runs now (reconcile's event), the plan's figures are the same
    assert not changed()
    before = live_version()
    cycle()
    assert not changed() and live_version() == before


def test_a_waiting_job_whose_place_moves_is_a_change(submit, cycle, tiers):
    submit(name="filler", replicas=[{"role": "Worker", "count": 2, "gpu": 8}])
    cycle()
    first, second = (submit(name=name, replicas=[{"role": "Worker", "count": 1, "gpu": 8}]) for name in ("a", "b"))
    cycle()
    assert changed() and cycle().written == 0 and not changed()
    Job.objects.filter(pk=second.pk).update(tier=tiers["production"])  # it goes first now
    assert cycle().written == 2 and changed()
    assert list(Job.objects.filter(pk__in=[first.pk, second.pk]).order_by("position").values_list("pk", flat=True)) == [
        second.pk, first.pk]  # fmt: skip


def test_losing_the_cluster_and_finding_it_again_are_changes_staying_lost_is_not(submit, cycle):
    submit(name="waits")
    cycle(on=Down())
    assert changed()
    cycle(on=Down())
    assert not changed()
    cycle()
    assert changed()


def test_a_node_that_joins_is_a_change(cycle):
    cycle()
    cycle()
    assert not changed()
    SimNode.objects.create(name="node-03", gpu=8)
    cycle()
    assert changed()


def test_a_failed_cycle_counts_as_a_change(cycle, cluster, clock, monkeypatch):
    cycle()
    cycle()
    before = live_version()
    monkeypatch.setattr(records, "usage_sample", lambda now: (_ for _ in ()).throw(DatabaseError("out of range")))
    with pytest.raises(DatabaseError):
        admission_cycle(cluster=cluster, now=clock())
    assert Cycle.objects.latest("id").failed and changed() and live_version() != before
