"""The loop's tasks on an install whose cluster cannot be built (no KUBECONFIG, not in a cluster):
they record an unreachable cluster, as when the API server does not answer, instead of failing
before the loop runs and leaving no trace but a worker's traceback."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling import tasks
from scheduling.models import Cycle

pytestmark = pytest.mark.django_db


@pytest.fixture
def unconfigured(settings, monkeypatch, tmp_path):
    settings.CLUSTER_BACKEND = "kubernetes"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_cycle_without_a_cluster_configuration_is_recorded_and_queued_jobs_say_why(unconfigured, submit):
    job = submit()
    summary = tasks.admission_cycle()
    assert summary.startswith("Cluster unreachable (No Kubernetes configuration")
    cycle = Cycle.objects.get()
    assert not cycle.cluster_reachable and "No Kubernetes configuration" in cycle.error
    job = Job.objects.get(pk=job.pk)
    assert job.state == Job.State.QUEUED and job.reason_code == "cluster_unreachable"


def test_a_reconcile_without_a_cluster_configuration_says_so(unconfigured, submit):
    submit()
    assert "No Kubernetes configuration" in tasks.reconcile()
