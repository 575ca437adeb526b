"""Jobs from elsewhere at scale, over real HTTP to the fake API server: what a reconcile pass and an admission
cycle cost the API server (requests counted, a bound that does not grow with the jobs), and what goes right
when a sweep starts many trials at once while their owners change them under Gangway.

`bench/adoption_requests.py` prints the same figures for a busy Monday (530 adopted jobs).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings

from jobs.models import Job, Sweep
from scheduling.loop import admission_cycle
from scheduling.refusals import backoff
from scheduling.reconcile import reconcile
from tests.cluster import busy_cluster as busy
from tests.cluster.fake_apiserver import kind_path
from tests.conftest import make_team

EXPERIMENT = "tune-lr"


@pytest.fixture
def teams(fake, tiers):
    """Team research (a sweep's team: cap 4 GPUs) and team maps (kubectl and pipeline jobs), each with 64 GPUs
    on sixteen nodes of 8 GPUs; their namespaces exist."""
    research = make_team("research", tiers, gpu=64, borrowing_limit=0)
    research.sweep_gpu_cap = 4
    research.save()
    maps = make_team("maps", tiers, gpu=64, borrowing_limit=0)
    for slug in ("research", "maps"):
        fake.add(busy.namespace(slug))
    for index in range(16):
        fake.add(busy.node(f"n{index:02d}"))
    return {"research": research, "maps": maps}


def _trials(fake, count: int, *, start: int = 0, experiment: str = EXPERIMENT) -> list[str]:
    names = [f"{experiment}-{index:04d}abcd" for index in range(start, start + count)]
    for name in names:
        fake.add(busy.trial(name, experiment, "research"))
        fake.add(busy.trial_job(name, "research"))
    return names


def _pipeline(fake, count: int, *, start: int = 0) -> None:
    for index in range(start, start + count):
        fake.add(busy.pipeline_job(f"nightly-step-{index:03d}", "maps", "nightly"))


def _steady_pass(fake, cluster) -> busy.Tally:
    reconcile(cluster=cluster)
    counting = busy.Counting(fake)
    reconcile(cluster=cluster)
    return counting.tally()


def _key(kind: str, namespace: str, name: str) -> tuple:
    return (*kind_path(kind), namespace, name)


# -- what a pass costs --------------------------------------------------------------------------------


def test_a_steady_pass_sends_as_many_requests_for_ten_times_the_adopted_jobs(teams, fake, cluster):
    _trials(fake, 4)
    _pipeline(fake, 4)
    few = _steady_pass(fake, cluster)
    _trials(fake, 36, start=4)
    _pipeline(fake, 36, start=4)

    many = _steady_pass(fake, cluster)

    assert Job.objects.count() == 80
    assert many.requests == few.requests  # lists, never a request per job
    assert many.of("get") == many.of("patch") == many.of("post") == 0
    assert many.of("list", "trials") == 1


def _sent_in_lists(fake, counting: busy.Counting, plural: str) -> Counter:
    """How many times each object of `plural` came in a list since `counting` started."""
    return Counter(name for path, names in fake.listed[counting.listed:] if path.endswith(f"/{plural}")
                   for name in names)  # fmt: skip


def test_a_pass_sends_each_adopted_object_once(teams, fake, cluster):
    _trials(fake, 6)
    _pipeline(fake, 4)
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)  # the sweep's cap admits 4 trials, the pipeline's 4 jobs start too
    for job in Job.objects.filter(state=Job.State.ADMITTED).select_related("team"):
        busy.run(fake, job)
    counting = busy.Counting(fake)

    reconcile(cluster=cluster)

    sent = _sent_in_lists(fake, counting, "pytorchjobs")
    assert Job.objects.filter(state=Job.State.RUNNING).count() == 8 and Job.objects.count() == 10
    assert len(sent) == 10 and set(sent.values()) == {1}  # once, not by the queue's list and the job ids' both
    assert counting.tally().objects == 10 + 8 + 6  # the 10 jobs, the 8 running pods, the sweep's 6 Trials


def test_the_pass_that_adopts_new_jobs_sends_one_label_patch_each_beside_its_lists(teams, fake, cluster):
    _trials(fake, 30)
    _pipeline(fake, 10)
    counting = busy.Counting(fake)

    result = reconcile(cluster=cluster)

    tally = counting.tally()
    assert result.adopted == 40
    assert tally.of("patch") == 40 and tally.of("get") == 0 and tally.of("post") == 0
    assert tally.of("list", "trials") == 1  # the trials' experiments: one list for all of them
    assert tally.total - tally.of("patch") == _steady_pass(fake, cluster).total  # the same lists as a steady pass


def test_an_admission_cycle_costs_its_reads_and_a_patch_for_each_job_it_admits(teams, fake, cluster):
    _trials(fake, 30)
    reconcile(cluster=cluster)
    counting = busy.Counting(fake)

    result = admission_cycle(cluster=cluster)

    tally = counting.tally()
    assert result.admitted == 4  # the sweep's cap: 4 GPUs of 1-GPU trials
    assert tally.of("patch") == 4 and tally.of("get") <= 4 and tally.of("post") == 0
    assert tally.total - tally.of("patch") - tally.of("get") <= 6  # nodes, pods twice, a list per job kind


def test_a_refused_job_is_written_back_once_however_many_passes_follow(teams, fake, cluster, tiers):
    teams["maps"].tiers.set([tiers["standard"]])
    fake.add(busy.outside_job("PyTorchJob", name="too-high", namespace="maps",
                              labels={"gangway.io/tier": "production"}))  # fmt: skip
    reconcile(cluster=cluster)
    counting = busy.Counting(fake)

    for _ in range(3):
        reconcile(cluster=cluster)

    assert len(fake.list("Event")) == 1
    assert counting.tally().of("patch") == counting.tally().of("post") == 0


def test_a_refused_job_its_owner_deletes_before_the_write_back_gets_no_event(teams, fake, cluster, tiers):
    teams["maps"].tiers.set([tiers["standard"]])
    fake.add(busy.outside_job("PyTorchJob", name="too-high", namespace="maps",
                              labels={"gangway.io/tier": "production"}))  # fmt: skip
    fake.before(lambda: fake.objects.pop(_key("PyTorchJob", "maps", "too-high")), method="PATCH", path="/too-high$")

    result = reconcile(cluster=cluster)  # the annotation's patch answers 404 Not Found

    assert result.error == "" and not Job.objects.exists()
    assert fake.list("Event") == []  # `kubectl describe` has nothing to describe


# -- a sweep starting many trials at once ------------------------------------------------------------


def test_every_trial_adopted_in_one_pass_joins_its_sweep_and_waits_with_a_place_or_its_caps_reason(teams, fake,
                                                                                                  cluster):
    _trials(fake, 200)
    _pipeline(fake, 5)

    result = reconcile(cluster=cluster)
    cycle = admission_cycle(cluster=cluster)

    assert result.adopted == 205
    sweep = Sweep.objects.get()
    assert (sweep.experiment, sweep.team.slug) == (EXPERIMENT, "research")
    trials = Job.objects.filter(submitted_via__startswith="katib experiment tune-lr, trial ")
    assert trials.count() == 200 and set(trials.values_list("sweep", flat=True)) == {sweep.pk}
    assert trials.filter(state=Job.State.ADMITTED).count() == 4 and cycle.admitted == 9
    waiting = trials.filter(state=Job.State.QUEUED)
    assert waiting.count() == 196
    # Held by their sweep's cap, they are never offered to the policy: no place in the queue, the cap's reason
    # (at the first cycle the sweep held nothing yet: its trials ahead filled the cap).
    assert set(waiting.values_list("reason_code", flat=True)) == {"sweep_cap_ahead"}
    assert set(waiting.values_list("position", flat=True)) == {None}
    admission_cycle(cluster=cluster)
    assert set(waiting.values_list("reason_code", flat=True)) == {"sweep_cap"}
    reasons = waiting.values_list("reason", flat=True)
    assert all(reason.startswith("Sweep tune-lr holds 4 of its 4 GPUs;") for reason in reasons)
    pipeline = Job.objects.filter(submitted_via="pipelines run nightly")
    assert set(pipeline.values_list("state", flat=True)) == {Job.State.ADMITTED}
    labelled = {obj["metadata"]["name"]: obj["metadata"]["labels"].get("gangway.io/job-id")
                for obj in fake.list("PyTorchJob")}  # fmt: skip
    assert all(labelled.values()) and len(labelled) == 205


def test_a_trial_katib_deletes_while_the_pass_labels_it_is_cancelled_at_the_next_pass(teams, fake, cluster):
    names = _trials(fake, 3)
    gone = names[1]
    fake.before(lambda: fake.objects.pop(_key("PyTorchJob", "research", gone)), method="PATCH", path=f"/{gone}$")

    result = reconcile(cluster=cluster)  # the label patch of the deleted one answers 404 Not Found

    assert result.error == "" and result.adopted == 3
    assert Job.objects.filter(state=Job.State.QUEUED).count() == 3
    reconcile(cluster=cluster)
    job = Job.objects.get(cluster_name=gone)
    assert job.state == Job.State.CANCELLED and job.events.filter(code="deleted_outside").exists()
    assert set(Job.objects.exclude(pk=job.pk).values_list("state", flat=True)) == {Job.State.QUEUED}


def test_a_trial_katib_deletes_before_its_admission_lands_frees_its_room(teams, fake, cluster):
    names = _trials(fake, 6)
    reconcile(cluster=cluster)
    gone = names[0]
    fake.before(lambda: fake.objects.pop(_key("PyTorchJob", "research", gone)), method="GET", path=f"/{gone}$")

    result = admission_cycle(cluster=cluster)

    assert result.error == "" and result.admitted == 4
    reconcile(cluster=cluster)
    assert Job.objects.get(cluster_name=gone).state == Job.State.CANCELLED
    admission_cycle(cluster=cluster)
    assert Job.objects.filter(state=Job.State.ADMITTED).count() == 4  # its GPU went to the next trial


def test_a_conflict_on_the_admission_patch_is_retried_and_the_admission_kept(teams, fake, cluster):
    [name] = _trials(fake, 1)
    reconcile(cluster=cluster)
    # Katib's controller wrote the object between Gangway's read and its patch: the server answers 409.
    fake.fail(409, method="PATCH", path=f"/pytorchjobs/{name}$",
              message=f'Operation cannot be fulfilled on pytorchjobs.kubeflow.org "{name}": the object has been '
                      "modified; please apply your changes to the latest version and try again")  # fmt: skip

    result = admission_cycle(cluster=cluster)

    job = Job.objects.get()
    assert result.admitted == 1 and job.state == Job.State.ADMITTED
    assert not job.events.filter(code__in=("cluster_refused", "cluster_failing")).exists()
    assert fake.get("PyTorchJob", name, "research")["spec"]["runPolicy"]["suspend"] is False


def test_an_admission_that_keeps_conflicting_is_left_to_the_next_pass_without_losing_it(teams, fake, cluster):
    [name] = _trials(fake, 1)
    reconcile(cluster=cluster)
    fake.fail(409, method="PATCH", path=f"/pytorchjobs/{name}$", times=10)

    admission_cycle(cluster=cluster)

    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED and job.not_before is None
    assert not job.events.filter(code__in=("cluster_refused", "cluster_failing")).exists()
    fake.heal()
    reconcile(cluster=cluster)  # still suspended though admitted: reconcile admits it in the cluster
    assert fake.get("PyTorchJob", name, "research")["spec"]["runPolicy"]["suspend"] is False
    assert Job.objects.get().state == Job.State.ADMITTED


def test_an_admission_that_conflicts_until_the_admission_timeout_is_evicted_and_requeued_saying_why(teams, fake,
                                                                                                      cluster):
    [name] = _trials(fake, 1)
    reconcile(cluster=cluster)
    fake.fail(409, method="PATCH", path=f"/pytorchjobs/{name}$", times=10**6)  # its owner's controller, for good
    admission_cycle(cluster=cluster)
    job = Job.objects.get()
    assert job.state == Job.State.ADMITTED
    timeout = settings.ADMISSION_TIMEOUT
    later = job.admitted_at + timedelta(seconds=timeout + 1)

    result = reconcile(cluster=cluster, now=later)

    job.refresh_from_db()
    assert result.error == "" and job.state == Job.State.QUEUED and job.attempt == 2
    assert job.not_before == later + backoff(1) and job.reason_code == "backoff"
    evicted = job.events.get(code="stuck_admission")
    assert evicted.message == (
        f"Evicted: its only replica was not running {timeout} s after admission (its PyTorchJob stayed suspended "
        "in the cluster: its admission was never written to it).")  # fmt: skip
    assert fake.get("PyTorchJob", name, "research")["spec"]["runPolicy"]["suspend"] is True


def test_a_conflict_on_the_adoption_label_is_retried_in_the_same_pass(teams, fake, cluster):
    [name] = _trials(fake, 1)
    fake.fail(409, method="PATCH", path=f"/pytorchjobs/{name}$")

    result = reconcile(cluster=cluster)

    job = Job.objects.get()
    assert result.adopted == 1
    assert fake.get("PyTorchJob", name, "research")["metadata"]["labels"]["gangway.io/job-id"] == str(job.pk)


def test_a_trial_created_running_skips_the_queue_and_is_never_touched(teams, fake, cluster):
    fake.add(busy.trial("tune-lr-0000run", EXPERIMENT, "research"))
    fake.add(busy.trial_job("tune-lr-0000run", "research", suspend=False))
    _trials(fake, 2)
    counting = busy.Counting(fake)

    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)

    assert not Job.objects.filter(cluster_name="tune-lr-0000run").exists()
    assert Job.objects.count() == 2
    patched = [path for method, path, _ in fake.requests[counting.requests:] if method != "GET"]
    assert not [path for path in patched if path.endswith("/tune-lr-0000run")]
    obj = fake.get("PyTorchJob", "tune-lr-0000run", "research")
    assert "gangway.io/job-id" not in obj["metadata"]["labels"] and "annotations" not in obj["metadata"]
