"""MAX_QUEUED_PER_TEAM: a submission that would take its team past the cap is refused, with nothing created."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job
from jobs.services import QueueFull, job_submit
from jobs.spec import parse_spec
from tests.conftest import spec_data

FULL = "Team maps already has 2 jobs queued, the most a team may queue (MAX_QUEUED_PER_TEAM); wait for some to start or cancel some."


@pytest.fixture
def cap_of_two(settings):
    settings.MAX_QUEUED_PER_TEAM = 2


def queue(team, count: int, *, state=Job.State.QUEUED, **overrides):
    """`count` jobs of `team`, moved to `state`."""
    jobs = [job_submit(team=team, spec=parse_spec(spec_data(team=team.slug, name=f"q-{i}", **overrides)))[0]
            for i in range(count)]  # fmt: skip
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(state=state)
    return jobs


def test_it_refuses_a_submission_at_the_cap_and_creates_nothing(cap_of_two, maps, owner):
    queue(maps, 2)

    with pytest.raises(QueueFull) as refused:
        job_submit(team=maps, spec=parse_spec(spec_data(name="third")), owner=owner)

    assert str(refused.value) == FULL
    assert Job.objects.count() == 2 and not Job.objects.filter(name="third").exists()


def test_it_names_thousands_and_a_cap_already_exceeded(settings, maps):
    settings.MAX_QUEUED_PER_TEAM = 1000
    assert str(QueueFull(maps, 1000, 1000)) == (
        "Team maps already has 1,000 jobs queued, the most a team may queue (MAX_QUEUED_PER_TEAM); wait for some "
        "to start or cancel some."
    )
    assert str(QueueFull(maps, 1200, 1000)).startswith("Team maps already has 1,200 jobs queued, more than the "
                                                        "1,000 a team may queue (MAX_QUEUED_PER_TEAM);")  # fmt: skip


def test_it_accepts_a_submission_below_the_cap(cap_of_two, maps, owner):
    queue(maps, 1)

    job, created = job_submit(team=maps, spec=parse_spec(spec_data(name="second")), owner=owner)

    assert created and job.state == Job.State.QUEUED and Job.objects.count() == 2


def test_only_queued_jobs_of_the_same_team_count(settings, maps, vision, owner):
    queue(maps, 3, state=Job.State.RUNNING)
    queue(vision, 2)
    settings.MAX_QUEUED_PER_TEAM = 2

    _, created = job_submit(team=maps, spec=parse_spec(spec_data(name="fits")), owner=owner)

    assert created


def test_a_cap_of_zero_caps_nothing(settings, maps, owner):
    settings.MAX_QUEUED_PER_TEAM = 0
    queue(maps, 3)

    _, created = job_submit(team=maps, spec=parse_spec(spec_data(name="fourth")), owner=owner)

    assert created and Job.objects.filter(state=Job.State.QUEUED).count() == 4


def test_an_idempotent_replay_at_the_cap_returns_the_existing_job(settings, maps, owner):
    spec = parse_spec(spec_data(name="keyed"))
    first, _ = job_submit(team=maps, spec=spec, owner=owner, idempotency_key="ci-1")
    settings.MAX_QUEUED_PER_TEAM = 1

    again, created = job_submit(team=maps, spec=spec, owner=owner, idempotency_key="ci-1")

    assert again.pk == first.pk and not created and Job.objects.count() == 1


def test_adoption_is_not_capped(cap_of_two, maps):
    """Jobs adopted from the cluster are there already: refusing them would not take them off the cluster."""
    queue(maps, 2)

    job, created = job_submit(team=maps, spec=parse_spec(spec_data(name="adopted")), via="kubectl", queue_cap=False)

    assert created and Job.objects.filter(state=Job.State.QUEUED).count() == 3


def test_manage_py_submit_says_why_it_refused(cap_of_two, maps, tmp_path):
    queue(maps, 2)
    path = tmp_path / "job.yaml"
    path.write_text("name: fourth\nimage: busybox\nreplicas: [{role: Worker, count: 1, gpu: 1}]\n")

    with pytest.raises(CommandError, match="Team maps already has 2 jobs queued"):
        call_command("submit", team="maps", file=str(path))
    assert not Job.objects.filter(name="fourth").exists()
