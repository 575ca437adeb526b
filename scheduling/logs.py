"""A job's logs and failure detail, read through the cluster port for the job page and the API, one read shared
between every viewer of the same job for a few seconds (`recent_logs`).

A replica's whole log for a download is in `scheduling/log_download.py`, and the API's follow cursor in
`scheduling/log_cursor.py`."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from datetime import datetime

from django.core.cache import caches
from django.utils import timezone

from jobs.models import Job
from scheduling.cluster import get_cluster
from scheduling.cluster.base import (
    LOG_TAIL,
    LOG_TAIL_MAX,
    PICK,
    Cluster,
    ClusterError,
    ClusterUnavailable,
    LogPosition,
    ReplicaLog,
    cluster_name,
    failing_replica,
)

# LOG_TAIL, LOG_TAIL_MAX and PICK are the port's words for a log read; the API and the page read them from here,
# the module they read logs through.

PAGE_TAIL = 30  # lines of each replica on the job page
# A replica is named "role-index" (worker-0), or by its pod when its operator labels none: a pod's name is
# a DNS subdomain. The page and the API check a replica asked for against it.
REPLICA_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"

# Every viewer of a job's logs polls them (the job page every 10 s), and each read lists the job's pods and
# reads a replica's log (the page: the one it shows; the API: each one asked for) from the API server,
# holding a web worker up to LOGS_DEADLINE. One read serves
# every viewer of the same job, replica and tail for FRESH_SECONDS (below the page's poll), failed reads too.
LOGS_CACHE = "logs"  # in Redis when REDIS_URL is set, so every web worker shares a read
FRESH_SECONDS = 5
KEEP_SECONDS = 60  # a read is still shown, with its age, while a newer one is in flight
READ_LOCK_SECONDS = 35  # outlives one read: the adapter bounds a whole read by LOGS_DEADLINE (20 s), plus its retries (3 s)
WAIT_SECONDS = 2.0  # how long a viewer with nothing kept waits for another viewer's read in flight
WAIT_STEP = 0.1


@dataclass(frozen=True)
class JobLogs:
    replicas: tuple[ReplicaLog, ...] = ()
    failure: ReplicaLog | None = None  # the replica that failed first, if one did
    unavailable: str = ""  # why the cluster could not be read; "" when it was
    read_at: datetime | None = None  # when the cluster was read, for an answer shared between viewers (recent_logs)

    def replica(self, name: str) -> ReplicaLog | None:
        return next((replica for replica in self.replicas if replica.replica == name), None)

    @property
    def shown(self) -> ReplicaLog | None:
        """The replica whose lines were read (a read for one replica's lines), or None."""
        return next((replica for replica in self.replicas if replica.read), None)


def has_run(job: Job) -> bool:
    """Whether the job ever got pods, so there may be logs to read."""
    return job.admitted_at is not None or job.started_at is not None


def job_logs(job: Job, *, replica: str = "", tail: int | None = LOG_TAIL, lines_of: str | None = None,
             timed: bool = False, after: dict[str, LogPosition] | None = None,
             cluster: Cluster | None = None) -> JobLogs:
    """Each replica's last `tail` lines (all of them, bounded, with None), and the failing replica; with
    `lines_of`, every replica's state but only that one's lines (PICK: the failing one's, else the first's);
    with `timed`, each line's time and the position after the last; with `after`, the lines after each
    replica's position (the port's `logs`).

    Returns an empty JobLogs for a job that never ran, without asking the cluster; one whose
    `unavailable` says why when the cluster cannot be read.
    """
    if not has_run(job):
        return JobLogs()
    try:
        own = job.cluster_name or cluster_name(job.pk, job.name)
        options = {"timed": timed, "after": after} if timed or after is not None else {}
        replicas = (cluster or get_cluster()).logs(job.team.slug, job.pk, name=own, replica=replica, tail=tail,
                                                   lines_of=lines_of, **options)  # fmt: skip
    except (ClusterUnavailable, ClusterError) as error:
        return JobLogs(unavailable=f"The logs could not be read from the cluster: {error}")
    return JobLogs(replicas=tuple(replicas), failure=failing_replica(replicas))


def recent_logs(job: Job, *, replica: str = "", tail: int, lines_of: str | None = None, timed: bool = False,
                after: dict[str, LogPosition] | None = None, cluster: Cluster | None = None) -> JobLogs:
    """job_logs shared between viewers, with `read_at` set: the same job (in the same state), replica, tail,
    replica whose lines are read, and positions read after. A kept read after a position is still exact: its
    lines are those after the position when it was read, and the next read goes on from its own positions.

    Returns the kept read while it is under FRESH_SECONDS old. Otherwise one viewer reads the cluster
    (claimed with cache.add) while the others get the kept read, up to KEEP_SECONDS old, or, with none
    kept, wait up to WAIT_SECONDS for it and then read the cluster themselves. The key holds nothing of
    the viewer: callers check that the viewer may see the job before asking (the page and the API do).
    """
    if not has_run(job):
        return JobLogs()
    cache = caches[LOGS_CACHE]
    key = logs_key(job, replica=replica, tail=tail, lines_of=lines_of, timed=timed, after=after)
    lock = key + ":reading"
    kept = cache.get(key)
    if kept is not None and (timezone.now() - kept.read_at).total_seconds() < FRESH_SECONDS:
        return kept
    if not cache.add(lock, True, READ_LOCK_SECONDS):
        if kept is not None:
            return kept
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(WAIT_STEP)
            if (kept := cache.get(key)) is not None:
                return kept
        return _read_and_keep(cache, key, job, replica=replica, tail=tail, lines_of=lines_of, timed=timed,
                              after=after, cluster=cluster)  # fmt: skip
    try:
        return _read_and_keep(cache, key, job, replica=replica, tail=tail, lines_of=lines_of, timed=timed,
                              after=after, cluster=cluster)  # fmt: skip
    finally:
        cache.delete(lock)


def logs_key(job: Job, *, replica: str, tail: int, lines_of: str | None = None, timed: bool = False,
             after: dict[str, LogPosition] | None = None) -> str:
    """The cache key of a job's kept read; its claim to read is this key + ":reading"."""
    # The state is in the key so the read after a job ends is a fresh one: that answer is the last the page polls.
    # The key's version changes with the shape of what is kept (ReplicaLog's fields), so that no worker unpickles
    # a read kept by an older release.
    positions = None if after is None else sorted(after.items())
    digest = hashlib.blake2b(repr((job.state, replica, tail, lines_of, timed, positions)).encode(),
                             digest_size=12).hexdigest()  # fmt: skip
    return f"logs3:{job.pk}:{digest}"


def _read_and_keep(cache, key: str, job: Job, *, replica: str, tail: int, lines_of: str | None, timed: bool,
                   after: dict[str, LogPosition] | None, cluster: Cluster | None) -> JobLogs:
    found = replace(job_logs(job, replica=replica, tail=tail, lines_of=lines_of, timed=timed, after=after,
                             cluster=cluster), read_at=timezone.now())  # fmt: skip
    cache.set(key, found, KEEP_SECONDS)
    return found
