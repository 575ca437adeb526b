"""What people read of a victim the cluster refuses to stop, and of the jobs its quota keeps waiting.

Its first refusal says until when Gangway asks it to stop and what happens then; once it runs on it was never
preempted, and its count of preemptions says so; a job of its team waiting for the quota it still holds is told
which job holds it and until when, its reason code the policy's.

On PostgreSQL and the simulated cluster, behind a webhook that refuses to stop the jobs it protects.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from core.durations import clock_time
from jobs.codes import Because
from jobs.models import Job, JobEvent
from jobs.services import job_cancel
from scheduling.cluster.base import ClusterError
from scheduling.loop import admission_cycle
from scheduling.policy.reasons import Code
from scheduling.reconcile import reconcile
from scheduling.refusals import stop_refused
from tests.scheduling.test_unstopped_victims_held_everywhere import FailingWebhook
from tests.scheduling.test_victims_that_run_on import (  # noqa: F401 (low, refused: fixtures)
    DENIED, WHOLE_NODE, Webhook, _object_name, low, refused,
)

QUOTA_HELD = ("Waiting for quota: needs 8 GPUs; team maps uses 8 of its 8 nominal and may borrow only 0 more (its "
              "borrowing limit is 0); it starts when jobs of the team free 8 GPUs.")  # fmt: skip


def _about(moment, today) -> str:
    return clock_time(timezone.localtime(moment), timezone.localtime(today).date())


def _runs_on(webhook, low, clock) -> None:
    clock.tick(601)
    reconcile(cluster=webhook, now=clock())
    low.refresh_from_db()
    assert low.state == Job.State.RUNNING and low.events.last().code == Because.RUNS_ON


def test_the_first_refusal_says_until_when_gangway_asks_and_that_the_job_then_runs_on_in_its_quota(
        low, submit, cluster, clock, settings):  # fmt: skip
    settings.ADMISSION_TIMEOUT = 900  # the figure said is the setting's
    webhook = Webhook(cluster, protected={_object_name(low)})
    submit(name="urgent", tier="production", replicas=WHOLE_NODE, simulate={"duration": 600})
    first = clock()

    admission_cycle(cluster=webhook, now=first)

    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.not_before == first
    assert low.events.get(code=Because.STOP_REFUSED).message == (
        f"The cluster refused to stop it (delete TFJob maps/{_object_name(low)}: 403 Forbidden: {DENIED}); Gangway "
        f"tries again at every reconcile until {_about(first + timedelta(seconds=900), first)}, 900 s after its "
        "first refusal; refused then, its preemption is given up and it runs on, counted in the quota of team maps.")


def test_the_note_is_the_same_at_every_refusal_so_it_is_said_once(refused, low, clock):
    webhook, _ = refused
    for _ in range(4):
        clock.tick(140)
        reconcile(cluster=webhook, now=clock())

    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING
    said = low.events.filter(code=Because.STOP_REFUSED)
    assert said.count() == 1 and said.get().message.endswith("counted in the quota of team maps.")


def test_a_victim_that_runs_on_was_never_preempted_and_its_count_goes_back(refused, low, clock, client, owner):
    webhook, _ = refused
    assert low.preemption_count == 1

    _runs_on(webhook, low, clock)

    assert low.preemption_count == 0
    client.force_login(owner)
    assert "preempted 1×" not in client.get(f"/jobs/{low.pk}/").content.decode()


def test_the_count_taken_back_never_goes_below_zero(refused, low, clock):
    webhook, _ = refused
    Job.objects.filter(pk=low.pk).update(preemption_count=0)  # counted by nobody (a row written by hand)

    _runs_on(webhook, low, clock)

    assert low.preemption_count == 0


def test_a_victim_preempted_again_after_running_on_counts_that_preemption_alone(refused, low, clock):
    webhook, _ = refused
    _runs_on(webhook, low, clock)
    webhook.protected.clear()  # the webhook lets it stop now

    admission_cycle(cluster=webhook, now=clock())

    low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING and low.preemption_count == 1


def test_a_job_waiting_for_the_quota_an_unstopped_victim_holds_is_told_which_job_holds_it_and_until_when(
        refused, low, clock):  # fmt: skip
    webhook, urgent = refused
    clock.tick(31)  # past the job's backoff

    reconcile(cluster=webhook, now=clock())
    admission_cycle(cluster=webhook, now=clock())

    urgent.refresh_from_db(), low.refresh_from_db()
    until = _about(low.not_before + timedelta(seconds=600), clock())
    assert urgent.reason_code == Code.BORROWING_LIMIT, "the policy's code, unchanged"
    assert urgent.reason == (
        f"{QUOTA_HELD} Job low (#{low.pk}), being preempted, still holds 8 GPUs of the team's quota: the cluster "
        f"refuses to stop it; Gangway tries until {until}, then lets it run on.")  # fmt: skip
    event = urgent.events.last()
    assert (event.kind, event.code, event.message) == (JobEvent.Kind.WAITING, Code.BORROWING_LIMIT, urgent.reason)


def test_past_the_bound_with_server_errors_since_the_waiting_job_is_told_the_victim_runs_on_at_the_next_refusal(
        refused, low, clock):  # fmt: skip
    """A 500 is no refusal: past the bound the victim still holds the quota, and the sentence says what happens
    next rather than a time gone by."""
    _, urgent = refused
    failing = FailingWebhook(refused[0].inner, protected=set(refused[0].protected))
    clock.tick(700)  # past ADMISSION_TIMEOUT from the first refusal, the server failing all along

    reconcile(cluster=failing, now=clock())
    admission_cycle(cluster=failing, now=clock())

    urgent.refresh_from_db(), low.refresh_from_db()
    assert low.state == Job.State.PREEMPTING
    until = _about(low.not_before + timedelta(seconds=600), clock())
    assert urgent.reason == (
        f"{QUOTA_HELD} Job low (#{low.pk}), being preempted, still holds 8 GPUs of the team's quota: the cluster "
        f"refuses to stop it; past {until}, Gangway lets it run on at the cluster's next refusal (a server error is "
        "none).")  # fmt: skip


def test_once_the_victim_runs_on_a_job_waiting_for_its_quota_reads_the_quota_sentence_alone(
        refused, low, submit, owner, clock):  # fmt: skip
    webhook, urgent = refused
    job_cancel(job=urgent, actor=owner)  # nothing left that would preempt low again
    patient = submit(name="patient", tier="experiment", replicas=WHOLE_NODE, simulate={"duration": 600})
    clock.tick(31)
    reconcile(cluster=webhook, now=clock())
    admission_cycle(cluster=webhook, now=clock())
    patient.refresh_from_db()
    assert patient.reason.startswith(f"{QUOTA_HELD} Job low (#{low.pk}), being preempted, still holds 8 GPUs")

    _runs_on(webhook, low, clock)
    admission_cycle(cluster=webhook, now=clock())

    patient.refresh_from_db()
    assert patient.reason_code == Code.BORROWING_LIMIT and patient.reason == QUOTA_HELD


def test_a_first_refusal_recorded_meanwhile_by_another_worker_keeps_its_time_in_the_note(refused, low, clock):
    """The loop and reconcile may both meet a victim's first refusal: the one that finds it recorded already
    says the time recorded, so both say the same and it is said once."""
    webhook, _ = refused
    recorded = low.not_before
    said = low.events.get(code=Because.STOP_REFUSED).message
    stale = Job.objects.get(pk=low.pk)
    stale.not_before = None  # as read before the other worker recorded the first refusal
    clock.tick(120)

    stop_refused(stale, ClusterError(f"delete TFJob maps/{_object_name(low)}: 403 Forbidden: {DENIED}"), clock())

    assert stale.not_before == recorded
    assert list(low.events.filter(code=Because.STOP_REFUSED).values_list("message", flat=True)) == [said]
