"""A victim the cluster refuses to stop holds its team's quota everywhere, and only a refusal makes it run on.

The job preempted for it is never created while it runs, wherever that job was placed; the node map and the
drain figures count it where it runs, as the cycle's snapshot does; a job on no known node still counts in its
team's quota when no node takes pods; and a server failure (a 500 of its namespace) neither starts nor
continues the clock after which it runs on, which is read from the cluster's first refusal, yet holds the
victim in its team's quota until its stop goes through.

On PostgreSQL and the simulated cluster, behind a webhook that refuses to stop the jobs it protects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from jobs.codes import Because
from jobs.models import Job
from scheduling.cluster.base import ClusterJob, ClusterUnavailable
from scheduling.cluster.faulty import Fault
from scheduling.loop import admission_cycle
from scheduling.models import ClusterNode, SimJob, SimNode
from scheduling.reconcile import reconcile
from scheduling.selectors import cluster_summary, node_rows
from scheduling.views import _node_rows
from tests.scheduling.test_victims_that_run_on import (  # noqa: F401 (low, refused: fixtures)
    DENIED, Webhook, _object_name, _promises, low, refused,
)

HALF_NODE = [{"role": "Worker", "count": 1, "gpu": 4}]
WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]
FAILING = 'Internal error occurred: failed calling webhook "protect.example.com": connection refused'


@dataclass
class FailingWebhook(Webhook):
    """The webhook, which cannot be called for the objects it protects while `failing`: the API server answers
    500 to their suspend and delete (a ServerFailing, the cluster answering reads); else it refuses them."""

    failing: bool = True

    def suspend_job(self, job: ClusterJob) -> None:
        if self.failing and job.name in self.protected:
            raise ClusterUnavailable(f"suspend TFJob {job.namespace}/{job.name}: 500: {FAILING}", status=500)
        return super().suspend_job(job)

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        if self.failing and name in self.protected:
            raise ClusterUnavailable(f"delete {kind} {namespace}/{name}: 500: {FAILING}", status=500)
        return super().delete_job(namespace, name, kind)


def test_a_job_admitted_for_quota_on_another_node_is_not_created_while_its_victim_runs_on(
        maps, vision, staff, submit, cluster, clock):  # fmt: skip
    """maps (8 GPUs, no borrowing) runs `low` on 4 GPUs of a node vision shares; production work of maps that
    takes a whole node preempts `low` and is placed on the other node. The cycle's apply phase meets an outage
    at the suspend; reconcile then meets the webhook's refusal."""
    maps.quotas.filter(resource="gpu").update(borrowing_limit=0)
    submit(name="other", team=vision, user=staff, replicas=HALF_NODE, simulate={"duration": 72000})
    admission_cycle(cluster=cluster, now=clock()), reconcile(cluster=cluster, now=clock())
    low = submit(name="low", tier="experiment", replicas=HALF_NODE, simulate={"duration": 72000})
    admission_cycle(cluster=cluster, now=clock()), reconcile(cluster=cluster, now=clock())
    clock.tick(601)
    webhook = Webhook(cluster, protected=set(), faults=[Fault("suspend_job", "before", ClusterUnavailable)])
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 72000})
    admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and urgent.state == Job.State.ADMITTED
    assert set(urgent.placement).isdisjoint(low.placement), "placed on the other node"

    webhook.protected.add(_object_name(low))
    clock.tick(5)
    reconcile(cluster=webhook, now=clock())

    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and not SimJob.objects.filter(job_id=urgent.pk).exists()
    assert urgent.state == Job.State.QUEUED and urgent.reason_code == Because.VICTIM_REFUSED
    assert urgent.reason.startswith(f"Not started: job low (#{low.pk}), preempted for it, could not be stopped")
    for _ in range(70):  # past ADMISSION_TIMEOUT: low runs on, and maps never holds more than its 8 GPUs
        clock.tick(10)
        reconcile(cluster=webhook, now=clock())
        assert _promises(cluster) == []
    low.refresh_from_db()
    assert low.state == Job.State.RUNNING and low.events.filter(code=Because.RUNS_ON).exists()
    assert not SimJob.objects.filter(job_id=urgent.pk).exists()


def test_the_node_map_and_the_drain_figures_count_a_victim_the_cluster_refuses_to_stop(refused, low):
    low.refresh_from_db()
    node = low.placement[0]

    assert {row.name: row for row in node_rows()}[node].used == 8
    ClusterNode.objects.exclude(name=node).update(unschedulable="cordoned")  # the other node drains
    summary = cluster_summary()
    assert (summary.capacity, summary.in_use, summary.free) == (8, 8, 0)


def test_the_node_map_is_read_again_once_the_cluster_refuses_to_stop_a_victim(low, clock):
    """The map is reused while its fingerprint stays the same: a victim whose stop is in flight holds nothing
    there; refused, it holds its node again."""
    Job.objects.filter(pk=low.pk).update(state=Job.State.PREEMPTING)
    _, rows = _node_rows()
    assert all(row.used == 0 for row in rows), "being stopped"

    Job.objects.filter(pk=low.pk).update(not_before=clock())  # the cluster refused to stop it
    _, rows = _node_rows()

    assert {row.name: row.used for row in rows}[low.placement[0]] == 8


def test_a_job_on_no_known_node_still_counts_in_its_quota_when_no_node_takes_pods(low, cluster, clock):
    Job.objects.filter(pk=low.pk).update(placement=["node-gone"])  # its node went away
    SimJob.objects.filter(job_id=low.pk).delete()
    SimNode.objects.update(schedulable=False)  # every node is cordoned

    result = admission_cycle(cluster=cluster, now=clock())

    assert next(team for team in result.gpu_usage if team["team"] == "maps")["used"] == 8


def test_a_server_failure_neither_starts_nor_continues_the_clock_after_which_a_victim_runs_on(
        low, submit, cluster, clock):  # fmt: skip
    webhook = FailingWebhook(cluster, protected={_object_name(low)})
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before is None, "no refusal: no clock"
    assert low.events.last().message.startswith("The cluster failed to stop it (a server error, no refusal) (")

    for _ in range(7):  # 700 s of 500s
        clock.tick(100)
        reconcile(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before is None
    assert not low.events.filter(code=Because.RUNS_ON).exists()
    assert not SimJob.objects.get(job_id=low.pk).suspended and not SimJob.objects.filter(job_id=urgent.pk).exists()

    webhook.failing = False  # the webhook answers again, and refuses
    first = clock()
    reconcile(cluster=webhook, now=first)
    webhook.failing = True
    reconcile(cluster=webhook, now=first + timedelta(seconds=700))  # a 500 past the bound: still no verdict
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before == first

    webhook.failing = False
    reconcile(cluster=webhook, now=first + timedelta(seconds=701))

    low.refresh_from_db()
    assert low.state == Job.State.RUNNING and low.stop_failed_at is None  # failed, then refused: runs on, all clear
    assert low.events.last().message.startswith("Runs on: the cluster refused to stop it for 701 s (")


def test_how_long_the_cluster_refused_is_read_from_its_first_refusal_whatever_the_setting_says(
        refused, low, clock, settings):  # fmt: skip
    webhook, _ = refused
    first = clock()
    settings.ADMISSION_TIMEOUT = 900  # raised after the first refusal

    reconcile(cluster=webhook, now=first + timedelta(seconds=601))
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING, "the bound is the setting's, counted from the first refusal"

    reconcile(cluster=webhook, now=first + timedelta(seconds=905))

    low.refresh_from_db()
    assert low.state == Job.State.RUNNING
    assert low.events.last().message == (
        f"Runs on: the cluster refused to stop it for 905 s (delete TFJob maps/{_object_name(low)}: 403 Forbidden: "
        f"{DENIED}), so its preemption is given up; it runs as any job of team maps does, counted in its quota, "
        "and a later cycle may preempt it again.")


def test_a_victim_whose_stop_the_server_fails_holds_its_team_s_quota_until_the_stop_goes_through(
        low, submit, cluster, clock):  # fmt: skip
    """Its pods run on while the 500s last: the job it was preempted for is not created beside it on the other,
    free node (its team would hold 16 GPUs of its 8), and a job of its team waiting for quota is told why."""
    webhook = FailingWebhook(cluster, protected={_object_name(low)})
    urgent = submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    admission_cycle(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before is None and low.stop_failed_at == clock()

    for _ in range(3):  # past the job's backoff, the 500s going on
        clock.tick(31)
        reconcile(cluster=webhook, now=clock())
        result = admission_cycle(cluster=webhook, now=clock())

    low.refresh_from_db(), urgent.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before is None, "a 500 is still no refusal"
    assert urgent.state == Job.State.QUEUED and not SimJob.objects.filter(job_id=urgent.pk).exists()
    assert next(team for team in result.gpu_usage if team["team"] == "maps")["used"] == 8
    assert (f"Job low (#{low.pk}), being preempted, still holds 8 GPUs of the team's quota: the cluster fails to "
            "stop it (a server error); Gangway asks again at every reconcile.") in urgent.reason
    assert _promises(cluster) == []

    webhook.protected.clear()  # the webhook answers again, and lets it stop
    clock.tick(31)
    reconcile(cluster=webhook, now=clock())  # suspended, then requeued
    reconcile(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.QUEUED and low.stop_failed_at is None
    admission_cycle(cluster=webhook, now=clock())
    urgent.refresh_from_db()
    assert urgent.state == Job.State.ADMITTED
