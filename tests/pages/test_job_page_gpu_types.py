"""The job page on a cluster with GPU types: the types asked, the type given, and why."""

from __future__ import annotations

import pytest

from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle

pytestmark = pytest.mark.django_db


def cycle():
    admission_cycle(cluster=SimulatedCluster())


@pytest.mark.parametrize("persona, status", [("owner", 200), ("member", 200), ("outsider", 404)])
def test_only_the_team_sees_a_typed_job(request, login, gpu_types, submit, persona, status):
    job = submit(gpu_type=["a100", "l4"])
    assert login(request.getfixturevalue(persona)).get(f"/jobs/{job.pk}/").status_code == status


def test_it_says_the_types_asked_before_admission(login, owner, gpu_types, submit):
    job = submit(gpu_type=["a100", "l4"])
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "<dt>GPU type</dt>" in body and "asked a100, l4 (in that order) — not admitted yet" in body


def test_it_says_the_type_it_got_and_the_event_says_why(login, owner, gpu_types, submit, htmx):
    filler = submit(name="filler", gpu_type=["a100"], replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    cycle()
    job = submit(name="second", gpu_type=["a100", "l4"], replicas=[{"role": "Worker", "count": 1, "gpu": 4}])
    cycle()
    body = login(owner).get(f"/jobs/{job.pk}/", **htmx).content.decode()  # the polled fragment too
    assert "asked a100, l4 (in that order) — got <b>l4</b>" in body
    assert "Admitted on l4 GPUs (choice 2 of 2: a100 could not take it now)" in body
    assert "asked a100 — got <b>a100</b>" in login(owner).get(f"/jobs/{filler.pk}/").content.decode()


def test_a_job_that_named_no_type_says_its_teams_types(login, owner, gpu_types, submit):
    job = submit()
    cycle()
    body = login(owner).get(f"/jobs/{job.pk}/").content.decode()
    assert "any type of team maps, cheapest first — got <b>l4</b>" in body


def test_without_types_the_page_says_nothing_of_them(login, owner, nodes, submit):
    job = submit()
    cycle()
    assert "GPU type" not in login(owner).get(f"/jobs/{job.pk}/").content.decode()
