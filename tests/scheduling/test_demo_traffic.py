"""The demo's traffic: a job now and then while few wait, a Katib sweep once in a while, the simulated cluster only."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs.models import Job
from scheduling import demo_traffic
from scheduling.models import SimOutsideJob

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db):
    call_command("seed_demo", stdout=open("/dev/null", "w"))
    Job.objects.filter(state=Job.State.QUEUED).update(state=Job.State.RUNNING)  # the seeded story is under way


def test_it_submits_one_job_a_look_while_few_wait(demo):
    said = demo_traffic.look()

    job = Job.objects.get(submitted_via=demo_traffic.VIA)
    assert said == f"Submitted job {job.pk}: road-graph-gnn-1 of team maps."
    assert (job.state, job.team.slug, job.gpu_total, job.owner.username) == ("queued", "maps", 2, "engineer")
    assert job.events.get().message.startswith("Submitted by engineer: 2 GPUs over 1 replica, tier standard.")


def test_it_submits_nothing_while_enough_wait(demo):
    for _ in range(demo_traffic.QUEUE_TARGET):
        demo_traffic.look()

    said = demo_traffic.look()

    assert said == f"{demo_traffic.QUEUE_TARGET} jobs wait already; nothing submitted."
    assert Job.objects.filter(submitted_via=demo_traffic.VIA).count() == demo_traffic.QUEUE_TARGET


def test_it_goes_round_its_templates_and_starts_a_sweep_once_in_a_while(demo):
    said = []
    for _ in range(demo_traffic.SWEEP_EVERY):
        Job.objects.filter(state=Job.State.QUEUED).update(state=Job.State.RUNNING)
        said.append(demo_traffic.look(timezone.now()))

    names = list(Job.objects.filter(submitted_via=demo_traffic.VIA).order_by("pk").values_list("name", flat=True))
    assert names == [f"{template[1]}-{turn + 1}" for turn, template in
                     enumerate(demo_traffic.TEMPLATES[:demo_traffic.SWEEP_EVERY - 1])]  # fmt: skip
    assert said[-1] == "Started Katib experiment demo-sweep-12 (4 trials of team research)."
    assert SimOutsideJob.objects.filter(name__startswith="demo-sweep-12-").count() == 4
    assert demo_traffic.look().startswith("Submitted job")  # the sweep counted as a turn: on to the next


def test_every_template_is_a_job_its_team_may_submit(demo):
    for turn in range(len(demo_traffic.TEMPLATES)):
        Job.objects.filter(state=Job.State.QUEUED).update(state=Job.State.RUNNING)
        assert demo_traffic._submit(turn).startswith("Submitted job"), demo_traffic.TEMPLATES[turn]


def test_it_submits_nothing_to_a_real_cluster(demo, settings):
    settings.CLUSTER_BACKEND = "kubernetes"

    assert demo_traffic.look() == "Demo traffic runs on the simulated cluster only; nothing submitted."
    assert not Job.objects.filter(submitted_via=demo_traffic.VIA).exists()
