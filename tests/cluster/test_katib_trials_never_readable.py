"""A trial's job gone from the cluster whose Trials cannot be read (its experiment deleted, and listing Trials
refused in its namespace for good) is not judged on a list that said nothing, but neither waits for ever: its
timeline says once that it waits to read its trial, and half an hour on (`adoption.TRIAL_UNREAD_MOST`) it is
cancelled as deleted, so its sweep closes and its GPUs stop counting against its team and the sweep's cap."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs.models import Job, Sweep
from jobs.selectors import sweeps_for
from scheduling.loop import admission_cycle
from scheduling.reconcile import reconcile
from tests.cluster.test_katib_trial_list_failures import TRIALS
from tests.cluster.test_katib_trials import _katib_removes, _trial, _trial_job
from tests.cluster.test_outside_jobs import world  # noqa: F401 (a fixture)


def test_a_deleted_experiments_trial_whose_trials_stay_unreadable_is_cancelled_in_the_end(world, fake, cluster, staff):
    fake.add(_trial())
    fake.add(_trial_job())
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    # The experiment is deleted: Katib's Trial and its job go with it; the Trials stay unreadable here.
    fake.objects.pop(("apis/kubeflow.org/v1beta1", "trials", "maps", _trial()["metadata"]["name"]), None)
    _katib_removes(fake)
    fake.fail(403, path=TRIALS, times=1000)
    now = timezone.now()

    reconcile(cluster=cluster, now=now)
    reconcile(cluster=cluster, now=now + timedelta(minutes=5))

    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED  # not judged on a list that said nothing, yet
    (waits,) = job.events.filter(message__contains="could not be read")  # said once, not at every pass
    assert "Katib's trials in namespace maps could not be read" in waits.message

    reconcile(cluster=cluster, now=now + timedelta(minutes=31))

    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED
    cancelling = job.events.get(to_state=Job.State.CANCELLING)
    assert "how its trial ended could not be read" in cancelling.message
    assert list(sweeps_for(staff, open_only=True)) == []
    assert Sweep.objects.count() == 1
