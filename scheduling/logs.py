"""A job's logs and failure detail, read through the cluster port for the job page, its downloads and the API."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.models import Job
from scheduling.cluster import get_cluster
from scheduling.cluster.base import LOG_TAIL, LOG_TAIL_MAX, Cluster, ClusterError, ClusterUnavailable, ReplicaLog, failing_replica

# LOG_TAIL and LOG_TAIL_MAX are the adapters' limits on a log read; the API reads them from here,
# the module it reads logs through.

PAGE_TAIL = 30  # lines of each replica on the job page


@dataclass(frozen=True)
class JobLogs:
    replicas: tuple[ReplicaLog, ...] = ()
    failure: ReplicaLog | None = None  # the replica that failed first, if one did
    unavailable: str = ""  # why the cluster could not be read; "" when it was

    def replica(self, name: str) -> ReplicaLog | None:
        return next((replica for replica in self.replicas if replica.replica == name), None)


def has_run(job: Job) -> bool:
    """Whether the job ever got pods, so there may be logs to read."""
    return job.admitted_at is not None or job.started_at is not None


def job_logs(job: Job, *, replica: str = "", tail: int | None = LOG_TAIL, cluster: Cluster | None = None) -> JobLogs:
    """Each replica's last `tail` lines (all of them, bounded, with None), and the failing replica.

    Returns an empty JobLogs for a job that never ran, without asking the cluster; one whose
    `unavailable` says why when the cluster cannot be read.
    """
    if not has_run(job):
        return JobLogs()
    try:
        replicas = (cluster or get_cluster()).logs(job.team.slug, job.pk, replica=replica, tail=tail)
    except (ClusterUnavailable, ClusterError) as error:
        return JobLogs(unavailable=f"The logs could not be read from the cluster: {error}")
    return JobLogs(replicas=tuple(replicas), failure=failing_replica(replicas))
