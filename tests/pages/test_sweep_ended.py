"""A finished sweep's page says that its Katib experiment ended, how and when, and which trial was best, linked
to its job, with that trial's metrics: what reconcile learns from the Experiment once Katib says it ended."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as tz

import pytest
from django.utils import timezone

from jobs.models import Job, JobEvent, Sweep
from scheduling.cluster.base import ExperimentResult
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.reconcile import reconcile

pytestmark = pytest.mark.django_db


def katib_ends(monkeypatch, sweep: Sweep, outcome: str, *, ended_at=None, best: str = "", metrics=()) -> None:
    """The sweep's trials end, then Katib says its experiment ended: one reconcile pass reads it (its last trial
    ended within OBJECTIVE_GRACE, so the sweep's namespace is still read)."""
    Job.objects.filter(sweep=sweep).update(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    result = ExperimentResult(namespace="maps", experiment=sweep.experiment, outcome=outcome, ended_at=ended_at,
                              best_trial=best, metrics=metrics)  # fmt: skip
    monkeypatch.setattr(SimulatedCluster, "experiments", lambda self, namespace: [result] if namespace == "maps" else [])
    reconcile(cluster=SimulatedCluster(failure_rate=0))


def test_reconcile_stores_the_end_of_the_sweep_s_experiment_and_no_job_event(sweep, monkeypatch):
    trial = Job.objects.filter(sweep=sweep).order_by("pk").first()
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz.utc)
    events = JobEvent.objects.count()
    katib_ends(monkeypatch, sweep, "Succeeded", ended_at=at, best=trial.cluster_name, metrics=(("accuracy", 0.93),))
    sweep.refresh_from_db()
    assert (sweep.ended, sweep.ended_at, sweep.best_trial) == (Sweep.Ending.SUCCEEDED, at, trial.cluster_name)
    assert sweep.best_metrics == [["accuracy", 0.93]]
    assert JobEvent.objects.count() == events


def test_a_finished_sweep_s_page_says_it_succeeded_when_and_its_best_trial_with_its_metrics(login, member, sweep,
                                                                                           monkeypatch):
    trial = Job.objects.filter(sweep=sweep).order_by("pk").last()
    at = timezone.now() - timedelta(hours=3)
    katib_ends(monkeypatch, sweep, "Succeeded", ended_at=at, best=trial.cluster_name,
               metrics=(("accuracy", 0.9312), ("loss", 0.25)))  # fmt: skip
    body = login(member).get(f"/jobs/sweeps/{sweep.pk}/").content.decode()
    ended = body[body.index('id="sweep-ended"'):]
    ended = ended[: ended.index("</section>")]
    assert '<span class="badge s-succeeded">Succeeded</span> Its experiment succeeded' in ended
    absolute = timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S %Z")
    assert f'title="{absolute}">3 h ago</time>' in ended  # relative, the absolute time on hover
    assert f'Best trial: <a href="/jobs/{trial.pk}/">{trial.name}</a>' in ended
    assert "with accuracy <b class=\"num\">0.9312</b>, loss <b class=\"num\">0.25</b>." in ended


def test_a_failed_experiment_reads_failed_and_says_when_katib_names_no_best_trial(login, member, sweep, monkeypatch):
    katib_ends(monkeypatch, sweep, "Failed", ended_at=timezone.now() - timedelta(minutes=5))
    body = login(member).get(f"/jobs/sweeps/{sweep.pk}/").content.decode()
    assert '<span class="badge s-failed">Failed</span> Its experiment failed' in body
    assert "Katib names no best trial" in body


def test_an_open_sweep_s_page_says_nothing_of_an_end(login, member, sweep):
    body = login(member).get(f"/jobs/sweeps/{sweep.pk}/").content.decode()
    assert 'id="sweep-ended"' not in body and "Its experiment" not in body


def test_the_polled_sweep_page_shows_the_end_once_reconcile_learns_it(login, member, sweep, htmx, monkeypatch):
    Job.objects.filter(sweep=sweep).update(state=Job.State.SUCCEEDED, finished_at=timezone.now())
    client = login(member)
    etag = client.get(f"/jobs/sweeps/{sweep.pk}/", **htmx)["ETag"]
    katib_ends(monkeypatch, sweep, "Succeeded", ended_at=timezone.now())
    fresh = client.get(f"/jobs/sweeps/{sweep.pk}/", **htmx, HTTP_IF_NONE_MATCH=etag)
    assert fresh.status_code == 200 and 'id="sweep-ended"' in fresh.content.decode()
