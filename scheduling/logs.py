"""A job's logs and failure detail, read through the cluster port for the job page, its downloads and the API;
a replica's whole log streamed for a download (`log_download`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
import zlib
from collections.abc import Callable, Generator, Iterator
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
from scheduling.cluster.log_text import StreamedLines

# LOG_TAIL, LOG_TAIL_MAX, PICK and LogPosition are the port's words for a log read; the API and the page read them from
# here, the module they read logs through.

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


# A download passes a replica's whole log on as it is read, however long, within DOWNLOAD_SECONDS from its start
# (the pods listed and the log opened included): gunicorn ends a request at 60 s, and the read of one chunk may
# wait up to the adapter's read timeout (10 s) beyond the bound.
DOWNLOAD_SECONDS = 40.0
DOWNLOAD_STOPPED = "... the download stopped here"  # the start of the last line of a download the time bound cut


@dataclass(frozen=True)
class LogDownload:
    """One replica's whole log to send, or why there is none: `body` is None for a job that never ran, a replica
    the job does not have, a cluster that cannot be read (`unavailable` says why), or a job of several
    replicas none of which was named (`replicas` names them)."""

    replica: ReplicaLog | None = None  # the replica whose log `body` is, its state without lines
    body: Iterator[bytes] | None = None
    unavailable: str = ""
    replicas: tuple[str, ...] = ()


def log_download(job: Job, *, replica: str = "", seconds: float = DOWNLOAD_SECONDS,
                 clock: Callable[[], float] = time.monotonic, cluster: Cluster | None = None) -> LogDownload:  # fmt: skip
    """The whole log of the job's replica `replica` (with "", of its only replica), read through the port's
    `log_stream` when asked; the replicas' states are read first only when none is named.

    The body is the log as `log_lines` reads it (a person's lines: escape sequences removed, control
    characters and bytes that are not UTF-8 as U+FFFD, each line ended by "\\n"), as UTF-8, passed on chunk by
    chunk as it is read, so that a log of any length holds one chunk at a time. It stops once `seconds` have
    passed (measured by `clock`) while more remains, with a last line saying so (DOWNLOAD_STOPPED), and a log
    the cluster stopped sending midway ends with a line saying so. Checks nothing of the viewer: callers check
    that the viewer may see the job (the page and the API do).
    """
    if not has_run(job):
        return LogDownload()
    deadline = clock() + seconds  # the opening read counts too: the request's time is what gunicorn bounds
    cluster = cluster or get_cluster()
    own = job.cluster_name or cluster_name(job.pk, job.name)
    try:
        if not replica:  # no replica's lines (lines_of names none): the states alone, one read of the pods
            names = tuple(state.replica for state in cluster.logs(job.team.slug, job.pk, name=own, lines_of=""))
            if len(names) != 1:
                return LogDownload(replicas=names)
            replica = names[0]
        stream = cluster.log_stream(job.team.slug, job.pk, replica=replica, name=own)
    except (ClusterUnavailable, ClusterError) as error:
        return LogDownload(unavailable=f"The log could not be read from the cluster: {error}")
    if stream is None:
        return LogDownload()
    body = _passed_on(stream.chunks, deadline=deadline, seconds=seconds, clock=clock)
    return LogDownload(replica=stream.replica, body=body)


def _passed_on(chunks: Generator[bytes, None, None], *, deadline: float, seconds: float,
               clock: Callable[[], float]) -> Iterator[bytes]:  # fmt: skip
    """The text of `chunks` as lines a person reads, a chunk at a time, until `deadline` (`seconds` after the
    download began); the connection behind `chunks` is closed when the reader stops early (a client that went
    away) or the time is up."""
    lines = StreamedLines()
    try:
        for chunk in chunks:
            if clock() > deadline:  # a chunk is still in hand: the log goes on
                yield (lines.end() + f"{DOWNLOAD_STOPPED} after {seconds:g} s, the longest one download may take; "
                       "the log goes on past this line.\n").encode()  # fmt: skip
                return
            if text := lines.feed(chunk):
                yield text.encode()
        if text := lines.end():
            yield text.encode()
    except (ClusterUnavailable, ClusterError) as error:
        yield (lines.end() + f"... the log is cut short here: {error}\n").encode()
    finally:
        chunks.close()


# A reader following a job's logs reads on from the cursor of its last answer: each replica's position after
# the last line it was given, as compressed compact JSON in URL-safe base64, opaque to readers so that its shape
# may change. Compressed, since the replicas' times are alike: a cursor of 64 replicas stays well within the
# 4 KB request line a proxy or gunicorn takes.
CURSOR_MAX = 4000  # characters
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
_CURSOR_JSON_MAX = 1_000_000  # bytes, once inflated
_CURSOR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z")
_REPLICA = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def log_cursor(positions: dict[str, LogPosition]) -> str:
    """The cursor that reads on from `positions` (replica name: its position)."""
    data = {name: [position.time, position.count] for name, position in sorted(positions.items())}
    packed = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def read_cursor(text: str) -> dict[str, LogPosition]:
    """The positions a cursor of `log_cursor` holds; raises ValueError for anything else."""
    if len(text) > CURSOR_MAX or not re.fullmatch(CURSOR_PATTERN, text):
        raise ValueError(text)
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), _CURSOR_JSON_MAX)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError(text)
        data = json.loads(raw)
    except (binascii.Error, zlib.error, ValueError) as error:
        raise ValueError(text) from error
    if not isinstance(data, dict):
        raise ValueError(text)
    positions = {}
    for name, value in data.items():
        if not (_REPLICA.fullmatch(name) and isinstance(value, list) and len(value) == 2):
            raise ValueError(text)
        at, count = value
        valid_time = at == "" or (isinstance(at, str) and _CURSOR_TIME.fullmatch(at))
        if not (valid_time and type(count) is int and 0 <= count <= 2**31 and (count > 0) == bool(at)):
            raise ValueError(text)
        positions[name] = LogPosition(at, count)
    return positions


def positions_of(found: JobLogs, before: dict[str, LogPosition] | None = None) -> dict[str, LogPosition]:
    """Each replica's position after this read (those of `before` for replicas it did not read)."""
    positions = dict(before or {})
    positions.update({replica.replica: replica.position for replica in found.replicas if replica.position is not None})
    return positions
