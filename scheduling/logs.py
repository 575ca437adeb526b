"""A job's logs and failure detail, read through the cluster port for the job page, its downloads and the API;
a replica's whole log streamed for a download, read on from a line where one download cannot carry it all
(`log_download`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urlencode

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
from scheduling.cluster.log_text import DIGEST_CHARS, SkippedLines, StreamedLines

# LOG_TAIL, LOG_TAIL_MAX, PICK and LogPosition are the port's words for a log read, and DIGEST_CHARS the length of a
# line's digest; the API and the page read them from here, the module they read logs through.

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
# wait up to the adapter's read timeout (10 s) beyond the bound. A log longer than that reads on from a line:
# the Kubernetes API reads a log from its start, a time or its end, so each download reads the lines before its
# first again and counts them (`SkippedLines`); a line count is exact whatever the chunks, and what a reader
# of the text can count itself.
DOWNLOAD_SECONDS = 40.0
# The starts of the last line of a download that does not end with the log: the time bound cut it, the cluster
# stopped sending, or the lines it was to read on from are no longer the log's. The first two end with where the
# rest is, `...from=N&last=DIGEST`; `gangway logs --all` reads on from there.
DOWNLOAD_STOPPED = "... the download stopped here"
DOWNLOAD_CUT_SHORT = "... the log is cut short here"
DOWNLOAD_CHANGED = "... the log changed"
FROM_MAX = 10**12  # lines a download may read on from: more than any log holds


class BadStart(ValueError):
    """A download's `from` or `last` that no download gives; `field` names it, the message says what it takes."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def download_start(query: Mapping[str, str]) -> tuple[int, str]:
    """The line a download starts at (`from`, the lines already received; 0 when absent) and the digest the
    line before it must have (`last`, as a download's end gives it; "" when absent, or with no line before).
    Raises BadStart for a value no download gives."""
    start = query.get("from", "0")
    if not (start.isascii() and start.isdigit() and len(start) <= len(str(FROM_MAX)) and int(start) <= FROM_MAX):
        raise BadStart("from", f"Lines already received, a whole number from 0 to {FROM_MAX:,}.")
    last = query.get("last", "")
    if last and not re.fullmatch(f"[0-9a-f]{{{DIGEST_CHARS}}}", last):
        raise BadStart("last", f"The digest of the last line received, as a download's last line gives it: "
                       f"{DIGEST_CHARS} characters 0-9 and a-f.")  # fmt: skip
    return int(start), last if int(start) else ""


def rest_query(lines: int, last: str, *, replica: str = "") -> str:
    """The query of the download of the rest of a log after `lines` lines, the last `last` (of `replica`, when
    the address does not name it); ends with `from=N&last=DIGEST` (`from=N` alone when no digest is known), as
    `gangway logs --all` reads it."""
    return urlencode({**({"replica": replica} if replica else {}), "from": lines,
                      **({"last": last} if lines and last else {})})  # fmt: skip


@dataclass(frozen=True)
class LogDownload:
    """One replica's whole log to send, or why there is none: `body` is None for a job that never ran, a replica
    the job does not have, a cluster that cannot be read (`unavailable` says why), or a job of several
    replicas none of which was named (`replicas` names them)."""

    replica: ReplicaLog | None = None  # the replica whose log `body` is, its state without lines
    body: Iterator[bytes] | None = None
    unavailable: str = ""
    replicas: tuple[str, ...] = ()


def log_download(job: Job, *, replica: str = "", start: int = 0, last: str = "",
                 rest: Callable[[str, int, str], str] | None = None, seconds: float | None = None,
                 clock: Callable[[], float] | None = None, cluster: Cluster | None = None) -> LogDownload:  # fmt: skip
    """The log of the job's replica `replica` (with "", of its only replica) from line `start` on (0: the whole
    log), read through the port's `log_stream` when asked; the replicas' states are read first only when none
    is named.

    The body is the log as `log_lines` reads it (a person's lines: escape sequences removed, control
    characters and bytes that are not UTF-8 as U+FFFD, each line ended by "\\n"), as UTF-8, passed on chunk by
    chunk as it is read, so that a log of any length holds one chunk at a time. The lines before `start` are
    read and left out; with `last`, only when the last of them still has that `line_digest`, else the body is a
    line saying the log changed (DOWNLOAD_CHANGED). It stops, between two lines, once `seconds`
    (DOWNLOAD_SECONDS) have passed (measured by `clock`) while more remains, with a last line saying so
    (DOWNLOAD_STOPPED), and a log the cluster stopped sending midway ends with its lines so far and a line
    saying so (DOWNLOAD_CUT_SHORT); each of the two ends with where the rest is: `rest(replica, lines, last)`
    (the lines given from the log's start, the digest of the last), by default `?` and its `rest_query`.
    Checks nothing of the viewer: callers check that the viewer may see the job (the page and the API do).
    """
    if not has_run(job):
        return LogDownload()
    seconds = DOWNLOAD_SECONDS if seconds is None else seconds
    clock = clock or time.monotonic
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
    name = stream.replica.replica
    where = rest or (lambda replica, lines, last: "?" + rest_query(lines, last, replica=replica))
    body = _passed_on(stream.chunks, start=start, last=last, deadline=deadline, seconds=seconds, clock=clock,
                      rest=lambda lines, digest: where(name, lines, digest))  # fmt: skip
    return LogDownload(replica=stream.replica, body=body)


def _passed_on(chunks: Generator[bytes, None, None], *, start: int, last: str, deadline: float, seconds: float,
               clock: Callable[[], float], rest: Callable[[int, str], str]) -> Iterator[bytes]:  # fmt: skip
    """The text of `chunks` from line `start` on as lines a person reads, a chunk at a time, until `deadline`
    (`seconds` after the download began); the connection behind `chunks` is closed when the reader stops early
    (a client that went away) or the time is up.

    A cut falls between two lines: the line not yet ended is left for the next download, which reads on after
    the lines given (`rest`). A line longer than LINE_HOLD already passed on in part is passed on to its end
    first, so that no line is ever given in part."""
    skipped = SkippedLines(start)
    lines = StreamedLines(start=start, last=last)
    try:
        for chunk in chunks:
            if clock() > deadline and not lines.under_way:  # a chunk is still in hand: the log goes on
                yield (f"{DOWNLOAD_STOPPED} after {seconds:g} s, the longest one download may take; the log goes "
                       f"on {_after(lines.count)}: the rest at {rest(lines.count, lines.last)}\n").encode()  # fmt: skip
                return
            if skipped.remaining:
                chunk = skipped.feed(chunk)
                if skipped.remaining:
                    continue
                if changed := _changed(skipped, start=start, last=last, rest=rest):
                    yield changed
                    return
            if text := lines.feed(chunk):
                yield text.encode()
        if skipped.remaining:
            skipped.end()
            if changed := _changed(skipped, start=start, last=last, rest=rest):
                yield changed
                return
        if text := lines.end():
            yield text.encode()
    except (ClusterUnavailable, ClusterError) as error:
        yield (f"{DOWNLOAD_CUT_SHORT}: {error}; the log goes on {_after(lines.count)}: the rest at "
               f"{rest(lines.count, lines.last)}\n").encode()  # fmt: skip
    finally:
        chunks.close()


def _after(lines: int) -> str:
    return f"after line {lines:,}" if lines else "from its start"


def _changed(skipped: SkippedLines, *, start: int, last: str, rest: Callable[[int, str], str]) -> bytes:
    """The line that ends a download read on from line `start` when the lines read before it are not those a
    reader received (fewer, or the last not `last`); b"" when they are."""
    if skipped.remaining:
        why = f"it has {start - skipped.remaining:,} lines now, fewer than the {start:,} received"
    elif last and skipped.last != last:
        why = f"its line {start:,} is no longer the line received there"
    else:
        return b""
    return (f"{DOWNLOAD_CHANGED} since its first {start:,} lines were read: {why} (a container restarted, a pod "
            f"was replaced or its log rotated); download it again from its start: {rest(0, '')}\n").encode()


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
