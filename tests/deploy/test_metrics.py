"""/metrics: Prometheus text read from the database, behind a bearer token, or closed without one unless opened."""

import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import Job

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def scrape(client, **headers) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_it_counts_admissions_preemptions_and_rejections_by_team_and_reason(client, busy_world):
    metrics = scrape(client)

    assert metrics[("gangway_admissions_total", (("team", "maps"),))] == 2
    assert metrics[("gangway_admissions_total", (("team", "vision"),))] == 1
    assert metrics[("gangway_preemptions_total", (("reason", "reclaimed"), ("team", "maps")))] == 1
    rejected = busy_world["too-big"]
    assert rejected.state == Job.State.REJECTED
    assert metrics[("gangway_rejections_total", (("reason", rejected.reason_code), ("team", "maps")))] == 1


def test_it_reports_the_queue_per_team_and_tier_with_the_oldest_wait(client, busy_world):
    metrics = scrape(client)

    queued = Job.objects.filter(state=Job.State.QUEUED, team__slug="maps").count()
    assert queued >= 1
    assert metrics[("gangway_queue_length", (("team", "maps"), ("tier", "standard")))] == queued
    assert metrics[("gangway_queue_oldest_wait_seconds", (("team", "maps"), ("tier", "standard")))] >= 0
    assert metrics[("gangway_jobs", (("state", "rejected"),))] == 1


def test_it_reports_gpus_used_nominal_borrowed_and_lent_per_team(client, busy_world):
    metrics = scrape(client)

    def gpus(kind, team):
        return metrics[(f"gangway_team_gpus_{kind}", (("team", team),))]

    assert gpus("nominal", "maps") == gpus("nominal", "vision") == 8
    assert gpus("used", "vision") == 8
    assert gpus("used", "maps") == sum(
        j.gpu_total for j in busy_world.values() if j.team.slug == "maps" and j.state in Job.ACTIVE_STATES
    )
    assert gpus("borrowed", "maps") == max(0, gpus("used", "maps") - 8)
    assert gpus("lent", "maps") == 0
    assert metrics[("gangway_cluster_gpus", (("kind", "capacity"),))] == 16


def test_it_reports_the_cycle_duration_histogram_and_reachability(client, busy_world):
    metrics = scrape(client)

    assert metrics[("gangway_admission_cycle_duration_seconds_count", ())] == 3
    assert metrics[("gangway_admission_cycle_duration_seconds_bucket", (("le", "+Inf"),))] == 3
    assert metrics[("gangway_admission_cycle_duration_seconds_sum", ())] > 0
    buckets = sorted(
        (float(dict(labels)["le"]), value) for (name, labels), value in metrics.items()
        if name == "gangway_admission_cycle_duration_seconds_bucket"
    )  # fmt: skip
    assert [value for _, value in buckets] == sorted(value for _, value in buckets)  # cumulative
    assert metrics[("gangway_cluster_reachable", ())] == 1
    assert metrics[("gangway_last_cycle_timestamp_seconds", ())] > 0


def test_pruning_old_cycles_keeps_the_histogram_cumulative(client):
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.models import Cycle
    from scheduling.records import cycle_retention, prune_cycles

    now = timezone.now()
    old = now - cycle_retention() - timedelta(hours=1)
    for k, duration in enumerate((0.02, 0.3, 4.0)):
        Cycle.objects.create(started_at=old + timedelta(seconds=k), duration=duration)
    Cycle.objects.create(started_at=now, duration=0.07)
    def histogram(metrics):
        return {key: value for key, value in metrics.items()
                if key[0].startswith("gangway_admission_cycle_duration_seconds")}

    before = histogram(scrape(client))

    assert prune_cycles(now) == 3
    assert list(Cycle.objects.values_list("duration", flat=True)) == [0.07]
    assert histogram(scrape(client)) == before
    assert before[("gangway_admission_cycle_duration_seconds_count", ())] == 4
    assert before[("gangway_admission_cycle_duration_seconds_bucket", (("le", "0.1"),))] == 2

    Cycle.objects.filter(duration=0.07).update(started_at=old)
    Cycle.objects.create(started_at=now, duration=0.5)
    assert prune_cycles(now) == 1  # a second prune adds to the totals
    after = histogram(scrape(client))
    assert after[("gangway_admission_cycle_duration_seconds_count", ())] == 5
    assert after[("gangway_admission_cycle_duration_seconds_bucket", (("le", "0.1"),))] == 2
    assert after[("gangway_admission_cycle_duration_seconds_bucket", (("le", "0.5"),))] == 4
    assert prune_cycles(now) == 0


def test_a_failed_task_is_counted_for_every_process_to_see(client, monkeypatch):
    from scheduling import cluster as ports
    from scheduling.tasks import reconcile

    before = scrape(client).get(("gangway_tasks_failed_total", (("task", "gangway.reconcile"),)), 0)

    def unreachable():
        raise RuntimeError("adapter crashed")

    monkeypatch.setitem(ports.ADAPTERS, "simulated", unreachable)
    assert reconcile.apply().failed()

    after = scrape(client)
    assert after[("gangway_tasks_failed_total", (("task", "gangway.reconcile"),))] == before + 1
    assert ("gangway_tasks_failed_total", (("task", "gangway.admission_cycle"),)) in after


def test_the_notifiers_tasks_are_counted_too(client):
    """The monitoring component's alert on failing tasks covers the notifier's, sending and token notices."""
    from portal.metrics import count_task_failure

    served = {dict(labels)["task"] for name, labels in scrape(client) if name == "gangway_tasks_failed_total"}
    assert {"notifications.warn_expiring_tokens", "notifications.prune_deliveries"} <= served

    before = scrape(client)[("gangway_tasks_failed_total", (("task", "notifications.warn_expiring_tokens"),))]
    count_task_failure(sender=type("Task", (), {"name": "notifications.warn_expiring_tokens"}))
    after = scrape(client)[("gangway_tasks_failed_total", (("task", "notifications.warn_expiring_tokens"),))]
    assert after == before + 1


def test_an_empty_world_still_answers(client):
    metrics = scrape(client)

    assert metrics[("gangway_admission_cycle_duration_seconds_count", ())] == 0
    assert ("gangway_cluster_reachable", ()) not in metrics


@override_settings(METRICS_TOKEN="s3cret-token")
def test_it_requires_the_bearer_token_when_one_is_set(client):
    missing = client.get("/metrics")
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})

    assert missing.status_code == wrong.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert scrape(client, Authorization="Bearer s3cret-token")


@override_settings(METRICS_TOKEN="", METRICS_PUBLIC=False)
def test_without_a_token_it_answers_nobody_unless_opened(client, busy_world):
    response = client.get("/metrics", headers={"Authorization": "Bearer anything"})

    assert response.status_code == 403
    assert response.content.decode() == ("/metrics is closed: set METRICS_TOKEN and scrape with Authorization: "
                                         "Bearer <token>, or METRICS_PUBLIC=1 to serve it to whoever reaches the web.\n")
    assert b"gangway_" not in response.content


@override_settings(METRICS_TOKEN="s3cret-token", METRICS_PUBLIC=True)
def test_a_token_set_is_asked_for_even_when_it_is_opened(client):
    assert client.get("/metrics").status_code == 401


@pytest.mark.parametrize(("debug", "public"), [("", False), ("1", True)], ids=["in production", "in debug"])
def test_it_is_closed_by_default_in_production_and_open_in_debug(tmp_path, debug, public):
    environment = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "GANGWAY_VAR_DIR": str(tmp_path),
                   "SECRET_KEY": "a-long-random-production-key", **({"DJANGO_DEBUG": debug} if debug else {})}
    result = subprocess.run([sys.executable, "-c", "from django.conf import settings; print(settings.METRICS_PUBLIC)"],
                            env=environment, cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip

    assert result.stdout.strip() == str(public), result.stderr[-2000:]



def test_it_counts_failed_cycles_pruned_ones_included(client):
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.models import Cycle
    from scheduling.records import cycle_retention, prune_cycles

    now = timezone.now()
    Cycle.objects.create(started_at=now - cycle_retention() - timedelta(hours=1), duration=0.1, failed=True, error="x")
    Cycle.objects.create(started_at=now, duration=0.1, failed=True, error="y")
    Cycle.objects.create(started_at=now, duration=0.1)
    assert scrape(client)[("gangway_cycle_failures_total", ())] == 2
    prune_cycles(now)
    assert scrape(client)[("gangway_cycle_failures_total", ())] == 2
