"""A replica's whole log for a download, streamed through the cluster port's `log_stream` a chunk at a time
within DOWNLOAD_SECONDS (`log_download`), and read on from a line where one download cannot carry it all
(`?from=N&last=DIGEST`: `download_start` reads it, `rest_query` writes it)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from jobs.models import Job
from scheduling.cluster import get_cluster
from scheduling.cluster.base import Cluster, ClusterError, ClusterUnavailable, ReplicaLog, cluster_name
from scheduling.cluster.log_text import DIGEST_CHARS, SkippedLines, StreamedLines
from scheduling.logs import has_run

# DIGEST_CHARS is the length of a line's digest, a download's `last`; the API reads it from here.

# A download passes a replica's whole log on as it is read, however long, within DOWNLOAD_SECONDS from its start
# (the pods listed and the log opened included): a download holds one of the web's threads all along (gunicorn's
# threaded worker ends no request itself), and the read of one chunk may wait up to the adapter's read timeout
# (10 s) beyond the bound. A log longer than that reads on from a line:
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
    deadline = clock() + seconds  # the opening read counts too: the request's time is what holds a thread
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
