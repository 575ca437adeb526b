"""A Katib sweep is one row on the dashboard's queue and on its team's page."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.models import Job, JobEvent, Sweep
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.reconcile import reconcile
from tenants.models import PriorityTier, Team

pytestmark = pytest.mark.django_db


def test_the_dashboard_shows_a_sweep_as_one_row_with_its_trials_and_gpus(login, owner, sweep):
    body = login(owner).get("/").content.decode()

    assert body.count(f'id="sweep-row-{sweep.pk}"') == 1
    assert "tune-lr" in body and "8 of 8 GPUs" in body
    assert "2 trials" in body  # running, and waiting
    assert "not reported yet" in body
    for trial in Job.objects.filter(state=Job.State.QUEUED):
        assert f'id="queue-row-{trial.pk}"' not in body  # the sweep's row stands for them


def test_the_best_objective_shows_once_katib_reports_it(login, owner, sweep):
    Sweep.objects.filter(pk=sweep.pk).update(objective="accuracy", best_objective=0.9312, maximize=True)

    body = login(owner).get("/").content.decode()

    assert "accuracy <b class=\"num\">0.9312</b>" in body and "(highest)" in body


def test_another_teams_sweep_is_not_shown(login, outsider, sweep):
    body = login(outsider).get("/").content.decode()

    assert "tune-lr" not in body and "sweep-row" not in body


def test_the_team_page_lists_its_sweeps(login, member, sweep):
    body = login(member).get("/teams/maps/").content.decode()

    assert "Katib sweeps" in body and f'id="sweep-row-{sweep.pk}"' in body and "8 of 8 GPUs" in body


def test_a_finished_sweep_leaves_the_queue_but_stays_on_the_team_page(login, member, sweep):
    Job.objects.filter(sweep=sweep).update(state=Job.State.SUCCEEDED)

    assert "sweep-row" not in login(member).get("/").content.decode()
    team_page = login(member).get("/teams/maps/").content.decode()
    assert f'id="sweep-row-{sweep.pk}"' in team_page and "4 trials" in team_page


def test_a_trials_page_says_which_object_it_was_adopted_from(login, owner, sweep):
    trial = Job.objects.filter(sweep=sweep).order_by("id").first()

    body = login(owner).get(f"/jobs/{trial.pk}/").content.decode()

    assert (f'adopted from PyTorchJob maps/{trial.cluster_name}, sweep <a href="/jobs/sweeps/{sweep.pk}/">tune-lr</a>'
            in body)
    assert f"by katib experiment tune-lr, trial {trial.cluster_name}" in body


def test_the_sweep_rows_and_the_team_page_header_show_the_teams_cap_and_tier_as_they_are_now(login, member, sweep):
    production = PriorityTier.objects.get(name="production")
    Team.objects.filter(slug="maps").update(sweep_gpu_cap=16, sweep_tier=production)

    team_page = login(member).get("/teams/maps/").content.decode()
    dashboard = login(member).get("/").content.decode()

    assert "at most 16 GPUs each at once" in team_page
    for body in (team_page, dashboard):
        row = body[body.index(f'id="sweep-row-{sweep.pk}"'):]
        row = row[: row.index("</tr>")]
        assert "8 of 16 GPUs" in row and "<td" in row and ">production</td>" in row


def test_a_sweep_row_shows_the_tier_its_trials_get_when_the_teams_sweep_tier_is_no_longer_its(login, member, sweep):
    maps = Team.objects.get(slug="maps")
    production = PriorityTier.objects.get(name="production")
    Team.objects.filter(pk=maps.pk).update(sweep_tier=production)
    maps.tiers.remove(production)  # the team may no longer use it: trials get its lowest tier

    body = login(member).get("/teams/maps/").content.decode()
    row = body[body.index(f'id="sweep-row-{sweep.pk}"'):]
    row = row[: row.index("</tr>")]
    assert ">experiment</td>" in row and "production" not in row


def test_a_best_objective_reconcile_learns_refreshes_the_polled_queue(login, owner, sweep, monkeypatch):
    reconcile(cluster=SimulatedCluster(failure_rate=0))  # the admitted trials run
    client, hx = login(owner), {"HTTP_HX_REQUEST": "true"}
    etag = client.get("/?part=queue", **hx)["ETag"]
    assert client.get("/?part=queue", **hx, HTTP_IF_NONE_MATCH=etag).status_code == 304
    reported = [replace(trial, value=0.9312) for trial in SimulatedCluster(failure_rate=0).trials("maps")]
    monkeypatch.setattr(SimulatedCluster, "trials", lambda self, namespace: reported)
    events = JobEvent.objects.count()

    reconcile(cluster=SimulatedCluster(failure_rate=0))  # no cycle, no job event: only the sweep's row changes

    assert Sweep.objects.get().best_objective == 0.9312 and JobEvent.objects.count() == events
    fresh = client.get("/?part=queue", **hx, HTTP_IF_NONE_MATCH=etag)
    assert fresh.status_code == 200 and "0.9312" in fresh.content.decode()


def test_the_team_page_shows_an_open_sweep_before_newer_ended_ones(login, member, sweep, maps):
    from tenants.views import SWEEPS_SHOWN

    ended = [Sweep.objects.create(team=maps, experiment=f"old-{i}") for i in range(SWEEPS_SHOWN)]

    body = login(member).get("/teams/maps/").content.decode()

    assert f'id="sweep-row-{sweep.pk}"' in body  # open, though older than ten sweeps that ended
    assert body.index(f'id="sweep-row-{sweep.pk}"') < body.index(f'id="sweep-row-{ended[-1].pk}"')
    assert f'id="sweep-row-{ended[0].pk}"' not in body  # the oldest ended one makes room for it
