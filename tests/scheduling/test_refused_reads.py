"""A cycle whose read the cluster refuses (403: a permission of Gangway's service account taken away) says
what to check wherever it is read: its summary (`manage.py cycle`, the worker's log), its row, and the
reason of every job it leaves queued, as the reconcile's and doctor's refusals already did."""

from __future__ import annotations

import pytest

from jobs.models import Job
from scheduling import records
from scheduling.cluster.base import ClusterError
from scheduling.cluster.faulty import Fault, FaultyCluster
from scheduling.loop import admission_cycle
from scheduling.models import Cycle

RULES = "Check the RBAC rules of Gangway's service account (deploy/kubernetes/rbac.yaml)."


@pytest.fixture
def refusing(cluster):
    return FaultyCluster(cluster, faults=[Fault("nodes", "before", ClusterError)])


def test_the_summary_of_a_cycle_whose_read_is_refused_names_the_rbac_rules(submit, refusing, clock):
    submit()

    result = admission_cycle(cluster=refusing, now=clock())

    assert result.summary == ("The cluster refused the cycle's read: injected: nodes failed before reaching the "
                              f"cluster; jobs stay queued. {RULES}")  # fmt: skip
    assert "unreachable" not in result.summary


def test_the_cycles_row_records_that_summary(submit, refusing, clock):
    submit()
    result = admission_cycle(cluster=refusing, now=clock())
    cycle = Cycle.objects.get()
    assert cycle.error == result.summary and not cycle.cluster_reachable


def test_the_jobs_left_queued_say_an_operator_restores_the_rbac_rules(submit, refusing, clock):
    job = submit()
    admission_cycle(cluster=refusing, now=clock())
    job = Job.objects.get(pk=job.pk)
    assert job.state == Job.State.QUEUED and job.reason == records.READ_REFUSED_REASON
    assert job.reason.endswith("until an operator restores Gangway's RBAC rules (deploy/kubernetes/rbac.yaml).")
