"""Katib sweeps on the simulated cluster: trials flow through the queue within their sweep's GPU cap."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import Job, Sweep
from scheduling.cluster import outside_examples, simulated_outside
from scheduling.models import Cycle, SimJob, SimOutsideJob
from scheduling.sweeps import HOLDING, SweepCode, within_caps
from tenants.models import PriorityTier, Team

HELD_STATES = (Job.State.ADMITTED, Job.State.RUNNING)


def _trials(clock, *, experiment="tune-lr", trials=4, gpu=4, first=0):
    for manifest in outside_examples.katib_trials(team="maps", experiment=experiment, trials=first + trials, gpu=gpu)[first:]:
        simulated_outside.add(manifest, now=clock())


def _held_gpus(experiment="tune-lr") -> int:
    return sum(Job.objects.filter(sweep__experiment=experiment, state__in=HELD_STATES).values_list("gpu_total", flat=True))


def test_trials_beyond_the_cap_wait_with_the_sweeps_reason(maps, clock, cycle):
    _trials(clock)  # 4 trials of 4 GPUs; the team's sweep cap is 8

    cycle()

    assert Sweep.objects.get().gpu_cap == 8
    assert _held_gpus() == 8
    waiting = list(Job.objects.filter(state=Job.State.QUEUED).order_by("id"))
    assert [job.reason_code for job in waiting] == [SweepCode.SWEEP_CAP_AHEAD] * 2
    assert waiting[0].reason == ("Sweep tune-lr holds 0 of its 8 GPUs and its trials ahead of this one ask 8 more; "
                                 "this trial waits until its sweep has 4 GPUs to spare.")  # fmt: skip
    cycle()  # the two admitted trials now hold the cap
    waiting[0].refresh_from_db()
    assert waiting[0].reason_code == SweepCode.SWEEP_CAP
    assert waiting[0].reason == "Sweep tune-lr holds 8 of its 8 GPUs; this trial starts when one of its trials ends."
    cycle()
    # One wait on the cap, said once, though its reason turned from "trials ahead" to "at its cap".
    assert waiting[0].events.filter(kind="waiting").count() == 1


def test_a_waiting_trial_starts_when_one_of_its_sweep_ends(maps, clock, cycle):
    _trials(clock)
    cycle()
    first = set(Job.objects.filter(state__in=HELD_STATES).values_list("pk", flat=True))

    for _ in range(40):  # simulated trials run a few minutes at most in these tests' seed
        clock.tick(120)
        cycle()
        if Job.objects.filter(state=Job.State.SUCCEEDED).exists() and _held_gpus():
            break
    assert Job.objects.filter(pk__in=first, state=Job.State.SUCCEEDED).exists()
    started_later = Job.objects.exclude(pk__in=first).filter(state__in=HELD_STATES + (Job.State.SUCCEEDED,))
    assert started_later.exists()
    assert _held_gpus() <= 8


def test_a_trial_larger_than_the_cap_says_so(maps, clock, cycle):
    maps.sweep_gpu_cap = 4
    maps.save()
    _trials(clock, trials=1, gpu=8)

    cycle()

    job = Job.objects.get()
    assert job.state == Job.State.QUEUED and job.reason_code == SweepCode.SWEEP_CAP_TOO_SMALL
    assert job.reason == ("This trial asks 8 GPUs, more than the 4 GPUs sweep tune-lr may hold at once (team maps's "
                          "sweep GPU cap); staff can raise it on the team's page in the admin.")  # fmt: skip


def test_raising_the_teams_cap_releases_a_trial_larger_than_the_old_cap(maps, clock, cycle):
    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=4)
    _trials(clock, trials=1, gpu=8)
    cycle()

    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=16)  # as staff do on the team's admin page
    clock.tick(60)
    cycle()

    assert Job.objects.get().state == Job.State.ADMITTED
    assert Sweep.objects.get().gpu_cap == 16


def test_lowering_the_teams_cap_holds_the_sweeps_next_trials(maps, clock, cycle):
    _trials(clock, trials=1, gpu=4)
    cycle()
    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=4)

    _trials(clock, trials=1, gpu=4, first=1)
    clock.tick(60)
    cycle()

    second = Job.objects.get(name="tune-lr-t001")
    assert second.state == Job.State.QUEUED and second.reason_code == SweepCode.SWEEP_CAP
    assert second.reason == "Sweep tune-lr holds 4 of its 4 GPUs; this trial starts when one of its trials ends."


def test_an_experiment_created_again_gets_the_teams_current_cap_and_tier(maps, clock, cycle):
    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=4)
    _trials(clock, trials=1, gpu=4)
    cycle()
    for row in list(SimOutsideJob.objects.all()):  # kubectl delete experiment tune-lr
        simulated_outside.remove(row.namespace, row.name)
    cycle()
    production = PriorityTier.objects.get(name="production")
    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=8, sweep_tier=production)

    _trials(clock, trials=1, gpu=8, first=1)  # kubectl apply: the same name again
    clock.tick(60)
    cycle()

    trial = Job.objects.get(name="tune-lr-t001")
    assert trial.sweep == Sweep.objects.get() and trial.tier == production
    assert trial.reason_code != SweepCode.SWEEP_CAP_TOO_SMALL


def test_jobs_of_no_sweep_are_never_held(maps, clock, cycle, owner):
    simulated_outside.add(outside_examples.kubectl_job(team="maps", name="bert", user="alice", workers=2, gpu=4), now=clock())

    cycle()

    job = Job.objects.get()
    assert job.sweep is None and job.state == Job.State.ADMITTED and job.submitted_via == "kubectl-create (alice)"


def _reset():
    for model in (SimJob, SimOutsideJob, Cycle, Job, Sweep):
        model.objects.all().delete()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cap=st.integers(1, 10), stream=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 400)), min_size=1, max_size=10))
def test_random_trial_streams_never_exceed_the_cap(maps, clock, cycle, cap, stream):
    """Trials of random sizes arrive at random times; after every cycle the sweep holds at most its cap."""
    _reset()
    Team.objects.filter(pk=maps.pk).update(sweep_gpu_cap=cap)
    for index, (gpu, wait) in enumerate(stream):
        _trials(clock, trials=1, gpu=gpu, first=index)
        clock.tick(wait)
        cycle()
        assert _held_gpus() <= cap
        running = SimJob.objects.filter(name__startswith="tune-lr-", started_at__isnull=False, finished_at__isnull=True)
        assert sum(_sim_gpus(job) for job in running) <= cap
    for _ in range(5):
        clock.tick(300)
        cycle()
        assert _held_gpus() <= cap


def _sim_gpus(job: SimJob) -> int:
    spec = job.manifest["spec"]["pytorchReplicaSpecs"]["Worker"]
    return spec["replicas"] * int(spec["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))


@given(cap=st.integers(1, 16), held=st.integers(0, 16),
       pending=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([10, 100]), st.integers(0, 50)), max_size=12))
def test_the_offered_trials_are_an_r3_prefix_within_the_cap(cap, held, pending):
    """Without a database: whatever the sweep holds and the queue holds, what is offered stays within the cap."""
    sweep, team = Sweep(pk=1, experiment="tune"), Team(slug="maps", sweep_gpu_cap=cap)
    holding = [Job(pk=999, sweep_id=1, gpu_total=held)]
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    jobs = []
    for index, (gpu, value, queued) in enumerate(pending):
        job = Job(pk=index + 1, sweep_id=1, gpu_total=gpu, queued_at=start + timedelta(seconds=queued))
        job.sweep, job.team, job.tier = sweep, team, PriorityTier(name=f"t{value}", value=value)
        jobs.append(job)

    result = within_caps(jobs, holding)

    offered = [job for job in sorted(jobs, key=lambda j: (-j.tier.value, j.queued_at, j.pk)) if job.pk not in result]
    if held > cap:
        assert offered == []
    assert held + sum(job.gpu_total for job in offered) <= max(cap, held)
    order = sorted(jobs, key=lambda j: (-j.tier.value, j.queued_at, j.pk))
    fitting = [job for job in order if job.gpu_total <= cap]
    assert offered == fitting[: len(offered)]  # a prefix: no small trial overtakes a waiting one


def test_holding_states_include_trials_still_stopping():
    assert Job.State.PREEMPTING in HOLDING and Job.State.CANCELLING in HOLDING


def test_a_trial_held_by_its_sweep_gets_one_waiting_event_however_often_its_reason_turns(maps, clock, cycle):
    _trials(clock, trials=12, gpu=2)  # cap 8: four run at once, the last trial waits through two turns

    last = None
    for _ in range(60):
        cycle()
        clock.tick(60)
        last = Job.objects.filter(name="tune-lr-t011").first()
        if last is not None and last.state != Job.State.QUEUED:
            break

    assert last.state != Job.State.QUEUED
    assert last.events.filter(kind="waiting").count() == 1


def test_moving_between_the_caps_two_waits_is_no_new_wait():
    at_cap = within_caps([_pending(gpu=4)], [Job(pk=9, sweep_id=1, gpu_total=8)])[1]
    ahead = within_caps([_pending(gpu=4, pk=2, queued=0), _pending(gpu=8, pk=1, queued=1)], [])[1]

    assert (at_cap.code, ahead.code) == (SweepCode.SWEEP_CAP, SweepCode.SWEEP_CAP_AHEAD)
    assert not at_cap.starts_waiting(SweepCode.SWEEP_CAP_AHEAD) and not ahead.starts_waiting(SweepCode.SWEEP_CAP)
    assert at_cap.starts_waiting("new") and at_cap.starts_waiting(SweepCode.SWEEP_CAP_TOO_SMALL)


def _pending(*, gpu, pk=1, queued=0):
    job = Job(pk=pk, sweep_id=1, gpu_total=gpu, queued_at=datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=queued))
    job.sweep, job.team, job.tier = Sweep(pk=1, experiment="tune"), Team(slug="maps", sweep_gpu_cap=8), PriorityTier(value=10)
    return job


def test_a_trial_held_for_a_missing_claim_takes_none_of_its_sweeps_cap(maps, clock, cluster, cycle):
    from scheduling.loop import admission_cycle
    from scheduling.reconcile import reconcile

    _trials(clock)  # 4 trials of 4 GPUs under a cap of 8
    reconcile(cluster=cluster, now=clock())
    first = Job.objects.order_by("id").first()
    Job.objects.filter(pk=first.pk).update(volumes=[{"claim": "missing", "path": "/data"}])

    admission_cycle(cluster=cluster, now=clock())

    first.refresh_from_db()
    assert first.state == Job.State.QUEUED and first.reason_code == "missing_claim"
    assert _held_gpus() == 8  # the two trials behind it, which its wait for a claim no longer holds back


def test_refused_trials_fail_as_katib_reads_them(maps, clock, cluster, cycle):
    """A trial Gangway refuses is marked Failed, so Katib gives its parallel place to the next trial."""
    for manifest in outside_examples.katib_trials(team="maps", experiment="tune-lr", trials=2, gpu=1):
        manifest["metadata"]["labels"]["gangway.io/tier"] = "overnight"  # a tier Gangway does not have
        simulated_outside.add(manifest, now=clock())

    cycle()
    cycle()

    assert not Job.objects.exists()  # refused when adopted
    for row in SimOutsideJob.objects.all():
        [failed] = [c for c in row.manifest["status"]["conditions"] if c["type"] == "Failed"]
        assert failed["status"] == "True" and failed["reason"] == "GangwayRejected"
        assert failed["message"].startswith("Refused by Gangway")
    assert {trial.trial: trial.outcome for trial in cluster.trials("maps")} == {
        "tune-lr-t000": "Failed", "tune-lr-t001": "Failed"}


def test_the_simulated_katib_ends_an_experiment_once_every_trial_has_and_names_the_most_accurate_trial(
        maps, clock, cycle, cluster):  # fmt: skip
    _trials(clock, trials=2, gpu=4)
    cycle()
    assert cluster.experiments("maps") == []  # its trials run

    for _ in range(40):
        clock.tick(120)
        cycle()
        if not Job.objects.filter(sweep__experiment="tune-lr").exclude(state__in=Job.TERMINAL_STATES).exists():
            break
    [ended] = cluster.experiments("maps")
    scored = {trial.trial: trial.value for trial in cluster.trials("maps")}
    best = max(scored, key=lambda name: scored[name])

    assert (ended.experiment, ended.outcome, ended.best_trial) == ("tune-lr", "Succeeded", best)
    assert ended.metrics == (("accuracy", scored[best]),)
    last = max(SimJob.objects.filter(namespace="maps").values_list("finished_at", flat=True))
    assert ended.ended_at == last
    cycle()  # reconcile reads it for the sweep's page
    sweep = Sweep.objects.get()
    assert (sweep.ended, sweep.best_trial) == (Sweep.Ending.SUCCEEDED, best)
    assert cluster.experiments("vision") == []
