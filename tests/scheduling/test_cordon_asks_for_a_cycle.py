"""`manage.py cordon` asks for an admission cycle, as a quota change does: a job waiting for the node it
uncordons starts at once, not at beat's next cycle."""

from __future__ import annotations

import io

import pytest
from celery import current_app
from django.core.cache import cache
from django.core.management import call_command

from jobs.models import Job
from portal import triggers
from scheduling import tasks
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import SimJob, SimNode


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def sent(monkeypatch):
    """The tasks asked for by name, an admission cycle run at once as a worker would run it. A trigger sends
    nothing within a second of the last one (`triggers.trigger`): each test starts with none sent."""
    cache.delete_many([f"gangway:trigger:{name}" for name in (triggers.ADMISSION_CYCLE, triggers.SYNC_TENANTS)])
    names = []

    def send_task(name, **options):
        names.append(name)
        if name == tasks.admission_cycle.name:
            tasks.admission_cycle()

    monkeypatch.setattr(current_app, "send_task", send_task)
    return names


@pytest.fixture
def large_cordoned(maps, submit):
    """Nodes small (4 GPUs) and large (8), large cordoned; maps waits with a job only large could hold."""
    SimNode.objects.create(name="small", gpu=4)
    SimNode.objects.create(name="large", gpu=8, schedulable=False)
    admission_cycle(cluster=SimulatedCluster())
    job = submit(name="whole-node", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    admission_cycle(cluster=SimulatedCluster())
    job.refresh_from_db()
    assert (job.state, job.reason_code) == (Job.State.QUEUED, "unschedulable")
    return job


def test_uncordon_asks_for_a_cycle_and_the_job_waiting_for_the_node_starts_there(large_cordoned, sent):
    out = _run("cordon", "large", "--uncordon")

    large_cordoned.refresh_from_db()
    assert sent == [triggers.ADMISSION_CYCLE]
    assert (large_cordoned.state, large_cordoned.placement) == (Job.State.ADMITTED, ["large"])
    assert out == "Uncordoned node large: an admission cycle is asked for now, and may place jobs there.\n"


def test_cordon_asks_for_a_cycle_too_and_a_node_left_as_it_was_asks_for_none(large_cordoned, sent):
    assert "was already cordoned; nothing changed" in _run("cordon", "large")
    assert sent == []

    out = _run("cordon", "small")

    assert sent == [triggers.ADMISSION_CYCLE]
    assert out == ("Cordoned node small: its jobs keep running; an admission cycle is asked for now, and places "
                   "nothing there: jobs only it could hold wait for it.\n")


def test_drain_evicts_the_replicas_there_which_take_room_elsewhere_as_it_opens(maps, submit, sent):
    SimNode.objects.create(name="small", gpu=4)
    SimNode.objects.create(name="large", gpu=8)
    job = submit(name="pair", replicas=[{"role": "Worker", "count": 2, "gpu": 4}], simulate={"duration": 7200})
    admission_cycle(cluster=SimulatedCluster())
    assert Job.objects.get(pk=job.pk).placement == ["large", "large"]

    out = _run("cordon", "large", "--drain")

    assert out == ("Drained node large: cordoned, and 2 replicas evicted, each waiting for room on another node; an "
                   "admission cycle is asked for now.\n")  # fmt: skip
    assert sent == [triggers.ADMISSION_CYCLE]
    sim = SimJob.objects.get(job_id=job.pk)  # the cycle's read placed the one that fits on small
    assert (sim.nodes, sim.unplaced) == (["small", ""], 1)
    assert SimNode.objects.get(name="large").schedulable is False
