"""The loop's promises, checked against the database and the cluster as they are now.

Used by the fault-injection tests and the soak benchmark after every step.
Each check returns sentences naming what is broken; empty when all holds.
"""

from __future__ import annotations

from collections import Counter

from jobs.models import Job
from scheduling.handed_back import given_back
from scheduling.cluster.base import RUNS, Cluster, JobStatus, NodeInfo, Phase
from scheduling.cluster.simulated_replicas import kept_room_drift
from scheduling.snapshot import UNSTOPPED, limits_of, own_statuses
from tenants.models import Team


def broken_promises(nodes: list[NodeInfo], statuses: list[JobStatus]) -> list[str]:
    """What holds at every moment, faults or not: no over-admission, no duplicate.

    - the jobs the database counts (admitted, running, those being preempted that the cluster refuses, or
      fails, to stop, and those being cancelled whose pods may still run, which still hold their room:
      `snapshot.UNSTOPPED`) fit their nodes and their teams' limits;
    - the cluster jobs that are not suspended or ended ask for no more GPUs than the cluster has, and those of
      each team's jobs for no more than its limits (`charged_by_team`): whatever the database says of a job, its
      object counts while it runs, whether queued (a create reported refused that went through), being stopped
      or ended (not stopped yet);
    - no Gangway job has two cluster objects.
    """
    problems = []
    capacity = {node.name: node.gpu for node in nodes}
    on_node: Counter = Counter()
    by_team: Counter = Counter()
    gpus_of: dict[int, int] = {}
    unstopped = set(Job.objects.filter(UNSTOPPED).values_list("pk", flat=True))
    for job in Job.objects.select_related("team").only("pk", "state", "replicas", "placement", "gpu_total", "team"):
        gpus_of[job.pk] = job.gpu_total
        if job.state not in Job.ACTIVE_STATES and job.pk not in unstopped:
            continue
        per_replica = [group.get("gpu", 0) for group in job.replicas for _ in range(group["count"])]
        for node, gpu in zip(job.placement, per_replica):
            on_node[node] += gpu
        by_team[job.team.slug] += job.gpu_total
    problems += [f"node {node} holds {gpu} GPUs of admitted jobs, above its {capacity[node]}"
                 for node, gpu in sorted(on_node.items()) if node in capacity and gpu > capacity[node]]  # fmt: skip
    claiming = [status for status in statuses if status.phase in RUNS]
    in_cluster = charged_by_team(statuses)
    for team in Team.objects.prefetch_related("quotas"):
        limits = limits_of(team.quotas.all())
        nominal = limits["nominal"].get("gpu")
        borrowing = limits["borrowing_limit"].get("gpu")
        if nominal is None or borrowing is None:
            continue
        if by_team[team.slug] > nominal + borrowing:
            problems.append(f"team {team.slug} holds {by_team[team.slug]} GPUs, above {nominal} + {borrowing}")
        if in_cluster[team.slug] > nominal + borrowing:
            problems.append(f"cluster jobs of team {team.slug} not suspended ask for {in_cluster[team.slug]} GPUs, "
                            f"above {nominal} + {borrowing}")
    claimed = sum(gpus_of.get(status.job_id, 0) for status in claiming)
    if claimed > sum(capacity.values()):
        problems.append(f"cluster jobs not suspended ask for {claimed} GPUs, above the cluster's {sum(capacity.values())}")
    objects = Counter(status.job_id for status in statuses)
    problems += [f"job {job_id} has {n} cluster objects" for job_id, n in sorted(objects.items()) if n > 1]
    return problems


def charged_jobs(statuses: list[JobStatus]) -> dict[int, tuple[str, int]]:
    """The jobs whose own objects are neither suspended nor ended (RUNS), whatever the job's state, with each
    one's team slug and GPUs: what each team asks for in the cluster. Left out, as the cycles leave them out of
    quota: a copy of a job's object (`snapshot.own_statuses`) and an adopted job's object given back to its
    owner (`handed_back.given_back`), both outside usage (R12)."""
    runs = [status for status in statuses if status.phase in RUNS]
    jobs = {job.pk: job for job in Job.objects.filter(pk__in={status.job_id for status in runs})
            .select_related("team").only("pk", "name", "cluster_name", "state", "gpu_total", "team__slug")}  # fmt: skip
    own = own_statuses(runs, jobs, orphans=False)
    back = given_back((jobs[job_id], status) for job_id, status in own.items())
    return {job_id: (jobs[job_id].team.slug, jobs[job_id].gpu_total) for job_id in own if job_id not in back}


def charged_by_team(statuses: list[JobStatus]) -> Counter:
    """The GPUs each team asks for in the cluster (`charged_jobs`), by team slug."""
    charged: Counter = Counter()
    for team, gpus in charged_jobs(statuses).values():
        charged[team] += gpus
    return charged


def out_of_line(statuses: list[JobStatus]) -> list[str]:
    """What holds once the cluster answers and reconcile has run: the two sides match one to one.

    - every admitted or running job has a cluster object that is not suspended;
    - every cluster job that is not suspended or ended belongs to an admitted or running job.
    """
    problems = []
    by_id = {status.job_id: status for status in statuses}
    active = dict(Job.objects.filter(state__in=Job.ACTIVE_STATES).values_list("pk", "state"))
    for job_id, state in sorted(active.items()):
        status = by_id.get(job_id)
        if status is None or status.phase is Phase.SUSPENDED:
            problems.append(f"job {job_id} is {state} but the cluster has it {status.phase if status else 'missing'}")
    for status in statuses:
        if status.phase in RUNS and status.job_id not in active:
            problems.append(f"cluster job {status.namespace}/{status.name} runs for no admitted job")
    return problems


def check(cluster: Cluster, *, settled: bool) -> list[str]:
    """Both checks against a healthy cluster's reading, and the simulated cluster's kept figures against what runs
    (`kept_room_drift`: [] on any other cluster); `settled` adds the one-to-one match."""
    statuses = cluster.job_statuses()
    problems = broken_promises(cluster.nodes(), statuses) + kept_room_drift()
    return problems + out_of_line(statuses) if settled else problems

