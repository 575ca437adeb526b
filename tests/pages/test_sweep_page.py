"""A sweep's row leads to its page: its trials, and why the waiting ones wait, in the cycle's own words."""

from __future__ import annotations

import pytest

from jobs.models import Job, Sweep
from jobs.selectors import sweeps_for, with_waits
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.sweeps import SweepCode
from tests.pages.conftest import katib_sweep

pytestmark = pytest.mark.django_db


def row_of(body: str, sweep: Sweep) -> str:
    """The sweep's row in a page."""
    row = body[body.index(f'id="sweep-row-{sweep.pk}"'):]
    return row[: row.index("</tr>")]


def waiting_trials(sweep: Sweep) -> list[Job]:
    return list(Job.objects.filter(sweep=sweep, state=Job.State.QUEUED).order_by("id"))


@pytest.fixture
def busy_sweep(submit, vision, maps, nodes, owner):
    """A busy cluster: vision runs 8 GPUs and maps 2, so 6 of 16 are free. Then Katib starts 5 trials of
    2 GPUs of experiment tune-lr under maps' cap of 8: three start, the fourth (within the cap) waits for
    quota or room, the fifth for the sweep's cap. Two cycles, so the cap's reason counts the trials that run."""
    submit(team=vision, name="vision-run", replicas=[{"role": "Worker", "count": 1, "gpu": 8}])
    submit(name="maps-run", replicas=[{"role": "Worker", "count": 1, "gpu": 2}])
    admission_cycle(cluster=SimulatedCluster(failure_rate=0))
    sweep = katib_sweep("tune-lr", trials=5, gpu=2)
    admission_cycle(cluster=SimulatedCluster(failure_rate=0))
    return sweep


def test_a_sweep_row_links_to_its_page_and_says_why_its_trials_wait(login, member, sweep):
    admission_cycle(cluster=SimulatedCluster(failure_rate=0))  # its two trials admitted last cycle now count
    first, second = waiting_trials(sweep)
    said = "Sweep tune-lr holds 8 of its 8 GPUs; this trial starts when one of its trials ends."
    assert first.reason == said  # the cycle's own sentence, which the row quotes

    for page in ("/", "/teams/maps/"):
        row = row_of(login(member).get(page).content.decode(), sweep)

        assert f'<a href="/jobs/sweeps/{sweep.pk}/">tune-lr</a>' in row
        assert f'<a href="/jobs/{first.pk}/" class="num">#{first.pk}</a> and 1 more trial: {said}' in row
        assert "other reason" not in row  # both wait for the cap


def test_a_sweep_stuck_at_3_running_shows_its_next_trials_reason_first(login, member, busy_sweep):
    running = Job.objects.filter(sweep=busy_sweep, state=Job.State.ADMITTED).count()
    nxt, capped = sorted(waiting_trials(busy_sweep), key=lambda job: job.position is None)
    assert running == 3 and nxt.position is not None  # offered to the policy, which found no room for it
    assert nxt.reason_code not in set(SweepCode) and capped.reason_code == SweepCode.SWEEP_CAP_AHEAD

    row = row_of(login(member).get("/").content.decode(), busy_sweep)

    assert f"#{nxt.pk}</a>: {nxt.reason}" in row  # why the sweep runs 3, not 4: the cap is not what holds it
    assert f'<a href="/jobs/sweeps/{busy_sweep.pk}/#sweep-waits">1 other reason</a>' in row
    assert capped.reason not in row  # on the sweep's page


def test_waits_are_grouped_by_reason_in_the_queue_order_of_each_ones_first_trial(busy_sweep):
    nxt, capped = sorted(waiting_trials(busy_sweep), key=lambda job: job.position is None)

    [sweep] = with_waits([busy_sweep])

    assert [(wait.code, wait.trials, wait.first, wait.reason) for wait in sweep.waits] == [
        (nxt.reason_code, 1, nxt.pk, nxt.reason), (SweepCode.SWEEP_CAP_AHEAD, 1, capped.pk, capped.reason)]
    assert with_waits([Sweep.objects.create(team=busy_sweep.team, experiment="idle")])[0].waits == []


def test_the_sweep_page_lists_its_trials_and_every_reason_they_wait(login, member, busy_sweep):
    nxt, capped = sorted(waiting_trials(busy_sweep), key=lambda job: job.position is None)

    response = login(member).get(f"/jobs/sweeps/{busy_sweep.pk}/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "tune-lr" in body and "6<small> of 8 GPUs</small>" in body
    for trial in Job.objects.filter(sweep=busy_sweep):
        assert f'href="/jobs/{trial.pk}/"' in body
    waits = body[body.index('id="sweep-waits"'):body.index('id="sweep-trials"')]
    assert f"#{nxt.pk}</a>: {nxt.reason}" in waits and f"#{capped.pk}</a>: {capped.reason}" in waits
    assert waits.index(nxt.reason) < waits.index(capped.reason)  # the next to start first
    trials = body[body.index('id="sweep-trials"'):]
    assert trials.index(f'href="/jobs/{nxt.pk}/"') < trials.index(f'href="/jobs/{capped.pk}/"')
    assert "Resubmit" not in body and "Cancel" not in body


def test_the_sweep_page_of_a_sweep_with_no_trial_waiting_has_no_reasons(login, member, sweep):
    Job.objects.filter(sweep=sweep).update(state=Job.State.SUCCEEDED)

    body = login(member).get(f"/jobs/sweeps/{sweep.pk}/").content.decode()

    assert "sweep-waits" not in body and "4</span><span class=\"tile-note\">best objective" in body


def test_the_polled_sweep_page_answers_304_until_a_trial_ends(login, member, sweep, htmx):
    client = login(member)
    first = client.get(f"/jobs/sweeps/{sweep.pk}/", **htmx)
    assert first.status_code == 200 and 'id="sweep-live"' in first.content.decode()
    assert client.get(f"/jobs/sweeps/{sweep.pk}/", **htmx, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304

    Job.objects.filter(sweep=sweep, state=Job.State.ADMITTED).update(state=Job.State.SUCCEEDED)

    fresh = client.get(f"/jobs/sweeps/{sweep.pk}/", **htmx, HTTP_IF_NONE_MATCH=first["ETag"])
    assert fresh.status_code == 200 and "0<small> of 8 GPUs</small>" in fresh.content.decode()


def test_the_polled_queue_refreshes_when_only_why_the_trials_wait_changes(login, member, sweep, htmx):
    client = login(member)
    before = client.get("/?part=queue", **htmx)
    assert "ask 8 more" in before.content.decode()  # the first cycle offered two trials, not admitted yet
    counts = sweeps_for(member).values_list("running", "waiting", "gpus").get()

    admission_cycle(cluster=SimulatedCluster(failure_rate=0))  # now they hold the cap: same counts, new reason

    fresh = client.get("/?part=queue", **htmx, HTTP_IF_NONE_MATCH=before["ETag"])
    assert counts == sweeps_for(member).values_list("running", "waiting", "gpus").get() == (2, 2, 8)
    assert fresh.status_code == 200 and "holds 8 of its 8 GPUs; this trial starts" in fresh.content.decode()


def test_an_outsider_gets_404_for_another_teams_sweep(login, member, outsider, sweep):
    assert login(member).get(f"/jobs/sweeps/{sweep.pk}/").status_code == 200  # there, for its own team

    response = login(outsider).get(f"/jobs/sweeps/{sweep.pk}/")

    assert response.status_code == 404 and "tune-lr" not in response.content.decode()


def test_staff_see_any_sweep_and_nobody_signed_out_does(login, client, staff, sweep):
    assert client.get(f"/jobs/sweeps/{sweep.pk}/").status_code == 302
    assert login(staff).get(f"/jobs/sweeps/{sweep.pk}/").status_code == 200
    assert login(staff).get("/jobs/sweeps/999999/").status_code == 404


def test_the_queue_keeps_the_open_sweeps_and_counts_only_their_trials(member, sweep):
    ended = katib_sweep("old-lr", trials=3, gpu=1)
    ended.trials.update(state=Job.State.SUCCEEDED)
    assert list(sweeps_for(member, open_only=True)) == [sweep]
    # Chosen before the counts (EXISTS), not by them (HAVING): the trials of every ended sweep were counted, then
    # thrown away, on every render of the dashboard's queue.
    assert "HAVING" not in str(sweeps_for(member, open_only=True).query)
