"""What jobs from elsewhere cost the API server on a busy Monday: requests and objects per pass.

A Katib experiment (parallelTrialCount 20, 200 trials) starts while another team's Pipelines run
creates 30 PyTorchJobs at once, and 300 jobs from elsewhere are already adopted and running. Against
the local fake API server (real HTTP; it records every request), on a scratch PostgreSQL database
(created, then dropped), this runs the real reconcile pass and admission cycle and prints, per pass,
the API requests by verb and resource and the objects they carried (each list item counts, and each
object read, patched or created):

  (a) the reconcile pass that adopts the 200 trials and the 30 pipeline jobs;
  (b) a steady reconcile pass: 530 adopted jobs, nothing new (each adopted object comes once: with the
      jobs labelled with a job id, not again with those labelled for a queue);
  (c) the admission cycle that admits 20 of them (the sweep's GPU cap holds the rest);
  (d) the reconcile pass after those 20 trials finished (Katib's Trials read for their outcome, and the
      experiment's best objective).

A steady pass's requests must not grow with the jobs: (b) is also run on a world a tenth the size,
and the requests per adopted job of both are printed.

    PYTHONPATH=. .venv/bin/python bench/adoption_requests.py [--trials 200] [--parallel 20]
        [--pipeline 30] [--running 300]

Nothing is timed: every figure is a count.
"""

from __future__ import annotations

import argparse
import logging
import os

from bench.pages_bench import PG, create_database, drop_database

# Gangway's modules are imported inside the functions that use them: this script sets up
# Django itself, on a database it picks at run time, before any of them may load.

DB = f"gangway_adoption_bench_{os.getpid()}"
RUNNING_TEAMS = ("maps", "vision", "perception")  # the 300 adopted running jobs, spread over these
SWEEP_TEAM, PIPELINE_TEAM, EXPERIMENT = "research", "perception", "tune-lr"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="Trials the Katib experiment creates (default 200).")
    parser.add_argument("--parallel", type=int, default=20, help="The experiment's parallelTrialCount, and the "
                        "sweep's GPU cap in 1-GPU trials: how many the cycle admits (default 20).")  # fmt: skip
    parser.add_argument("--pipeline", type=int, default=30, help="PyTorchJobs of the Pipelines run (default 30).")
    parser.add_argument("--running", type=int, default=300, help="Jobs from elsewhere adopted and running "
                        "before it starts (default 300).")  # fmt: skip
    options = parser.parse_args()
    os.environ["DATABASE_URL"] = f"{PG}/{DB}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.test_settings")
    os.environ["CELERY_BROKER_URL"] = "memory://"  # the tasks a pass asks for go nowhere: no worker runs here
    os.environ.setdefault("DJANGO_DEBUG", "1")
    import django

    django.setup()
    from django.db import connection

    logging.getLogger("gangway").setLevel(logging.ERROR)  # a line per adoption would drown the figures
    logging.getLogger("kombu").setLevel(logging.ERROR)
    create_database(DB)
    try:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        monday(options)
        small = argparse.Namespace(trials=options.trials // 10, parallel=options.parallel // 10 or 1,
                                   pipeline=options.pipeline // 10, running=options.running // 10)  # fmt: skip
        steady_only(small, big=options)
    finally:
        connection.close()
        drop_database(DB)


def _world(options):
    """A fresh fake API server and database world: the teams, nodes enough for every job, and the jobs from
    elsewhere already adopted and running; returns (fake, cluster)."""
    from kubernetes.client import Configuration

    from jobs.models import Job, JobEvent, Sweep
    from scheduling.cluster.kubernetes import KubernetesCluster
    from scheduling.cluster.kubernetes_api import client_for
    from scheduling.loop import admission_cycle
    from scheduling.models import ClusterNode, Cycle
    from scheduling.reconcile import reconcile
    from tenants.models import PriorityTier, Quota, Team
    from tests.cluster import busy_cluster as busy
    from tests.cluster.fake_apiserver import FakeApiServer
    from tests.cluster.test_outside_jobs import outside_job

    for model in (JobEvent, Job, Sweep, Quota, Cycle, ClusterNode):
        model.objects.all().delete()
    Team.objects.all().delete()
    PriorityTier.objects.all().delete()
    tiers = [PriorityTier.objects.create(name="standard", value=100, grace_period=30),
             PriorityTier.objects.create(name="experiment", value=10, grace_period=10)]  # fmt: skip
    per_team = -(-options.running // len(RUNNING_TEAMS))
    # Every team's quota is as large as what it runs (nothing to borrow): the cycle admits the sweep's trials
    # up to its cap, and the pipeline's jobs wait for their team's quota.
    nominal = {slug: per_team for slug in RUNNING_TEAMS} | {SWEEP_TEAM: options.parallel}
    for slug, gpus in nominal.items():
        team = Team.objects.create(slug=slug, name=slug.title(), default_tier=tiers[0],
                                   sweep_gpu_cap=options.parallel)  # fmt: skip
        team.tiers.set(tiers)
        Quota.objects.create(team=team, resource="gpu", nominal=gpus, borrowing_limit=0, max_per_replica=8)
    fake = FakeApiServer().start()
    for slug in nominal:
        fake.add(busy.namespace(slug))
    gpus = sum(nominal.values()) + options.pipeline
    for index in range(-(-gpus // 8)):
        fake.add(busy.node(f"n{index:03d}"))
    cluster = KubernetesCluster(client_for(Configuration(host=fake.url)))
    for index in range(options.running):
        team = RUNNING_TEAMS[index % len(RUNNING_TEAMS)]
        fake.add(outside_job("PyTorchJob" if index % 2 else "TFJob", name=f"kubectl-{index:04d}", namespace=team,
                             gpu=1, replicas=1))  # fmt: skip
    reconcile(cluster=cluster)
    admission_cycle(cluster=cluster)
    for job in Job.objects.filter(state=Job.State.ADMITTED).select_related("team"):
        busy.run(fake, job)
    reconcile(cluster=cluster)
    assert Job.objects.filter(state=Job.State.RUNNING).count() == options.running
    return fake, cluster


def _monday_starts(fake, options) -> None:
    """Katib creates the experiment's trials (each Trial, then its job), the Pipelines run its jobs."""
    from tests.cluster import busy_cluster as busy

    for index in range(options.trials):
        name = f"{EXPERIMENT}-{index:04d}abcd"
        fake.add(busy.trial(name, EXPERIMENT, SWEEP_TEAM))
        fake.add(busy.trial_job(name, SWEEP_TEAM))
    for index in range(options.pipeline):
        fake.add(busy.pipeline_job(f"nightly-step-{index:03d}", PIPELINE_TEAM, "nightly"))


def _print(title: str, tally, adopted: int) -> None:
    print(f"{title}: {tally.total} requests ({tally.total / adopted:.3f} per adopted job), "
          f"{tally.objects} objects")  # fmt: skip
    print(f"    {tally.line()}")


def monday(options) -> None:
    from jobs.models import Job, Sweep
    from scheduling.loop import admission_cycle
    from scheduling.reconcile import reconcile
    from tests.cluster import busy_cluster as busy

    fake, cluster = _world(options)
    try:
        adopted = options.running + options.trials + options.pipeline
        print(f"{options.running} jobs from elsewhere running; then {options.trials} Katib trials "
              f"(parallelTrialCount {options.parallel}) and {options.pipeline} pipeline jobs arrive at once.\n")  # fmt: skip
        _monday_starts(fake, options)

        counting = busy.Counting(fake)
        result = reconcile(cluster=cluster)
        _print(f"(a) the pass that adopts {result.adopted}", counting.tally(), adopted)
        sweep = Sweep.objects.get(experiment=EXPERIMENT)
        print(f"    {sweep.trials.count()} trials in sweep {sweep.experiment}; "
              f"{Job.objects.filter(state=Job.State.QUEUED).count()} queued")  # fmt: skip

        counting = busy.Counting(fake)
        reconcile(cluster=cluster)
        _print(f"(b) a steady pass, {adopted} adopted", counting.tally(), adopted)

        counting = busy.Counting(fake)
        cycle = admission_cycle(cluster=cluster)
        _print(f"(c) the admission cycle ({cycle.summary})", counting.tally(), adopted)
        waiting = Job.objects.filter(state=Job.State.QUEUED)
        capped = waiting.filter(reason_code__startswith="sweep_cap").count()
        print(f"    {waiting.exclude(position=None).count()} of {waiting.count()} waiting jobs have a place in the "
              f"queue; {capped} trials wait for their sweep's cap, which offers them to no plan (no place)")  # fmt: skip

        admitted = list(Job.objects.filter(state=Job.State.ADMITTED).select_related("team"))
        for job in admitted:
            busy.run(fake, job)
        reconcile(cluster=cluster)
        for index, job in enumerate(admitted):
            value = 0.80 + index / 1000
            fake.add(busy.trial(job.cluster_name, EXPERIMENT, SWEEP_TEAM, outcome="Succeeded", value=value))
            busy.finish(fake, job)
        counting = busy.Counting(fake)
        reconcile(cluster=cluster)
        sweep.refresh_from_db()
        ended = Job.objects.filter(sweep=sweep, state=Job.State.SUCCEEDED).count()
        _print(f"(d) the pass after {len(admitted)} trials finished", counting.tally(), adopted)
        print(f"    {ended} trials succeeded; sweep {sweep.experiment}'s best {sweep.objective} "
              f"{sweep.best_objective:.3f}\n")
    finally:
        fake.stop()


def steady_only(options, *, big) -> None:
    """A steady pass on a world `options` sizes, beside the full one's, per adopted job."""
    from scheduling.reconcile import reconcile
    from tests.cluster import busy_cluster as busy

    fake, cluster = _world(options)
    try:
        _monday_starts(fake, options)
        reconcile(cluster=cluster)
        counting = busy.Counting(fake)
        reconcile(cluster=cluster)
        adopted = options.running + options.trials + options.pipeline
        _print(f"(b) a steady pass on a world a tenth the size, {adopted} adopted", counting.tally(), adopted)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
