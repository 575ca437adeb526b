"""A job's replica logs read through the Kubernetes API (the port's `logs`): one replica's lines or all,
a bounded tail or the lines after a position, within a deadline for the whole read, since a person
waits on the page; and one replica's whole log streamed in chunks (the port's `log_stream`)."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace

import urllib3

from scheduling.cluster.base import (
    LOG_CHUNK_BYTES,
    LOG_LIMIT_BYTES,
    LOG_LINE_BYTES,
    LOG_READ_BYTES,
    LOG_TAIL,
    PICK,
    ClusterUnavailable,
    LogPosition,
    LogStream,
    ReplicaLog,
    failing_replica,
    no_bytes,
)
from scheduling.cluster.kubernetes_api import BAD_REQUEST, NOT_FOUND, Api
from scheduling.cluster.kubernetes_pods import controller_name, main_container, replica_log, replica_name, replica_order
from scheduling.cluster.log_text import STAMP_BYTES, lines_after, log_lines, position_after, timed_log_lines
from scheduling.cluster.manifests import JOB_ID_LABEL

# A job's logs are read while a person waits (and a web thread with them): each pod's
# log gets a short read timeout, and the whole job's read a deadline, past which it is unavailable.
LOG_READ_TIMEOUT = (5.0, 10.0)
LOGS_DEADLINE = 20.0


def read_logs(api: Api, namespace: str, job_id: int, *, seconds: float, name: str = "", replica: str = "",
              tail: int | None = LOG_TAIL, lines_of: str | None = None, timed: bool = False,
              after: dict[str, LogPosition] | None = None) -> list[ReplicaLog]:
    """Returns each replica pod of the job with its last `tail` log lines and how it stopped.

    Pods are found by the `gangway.io/job-id` label, less those a job object other than `name`
    controls (a renamed copy's). A log is read only for a container that has run (one not yet
    started has no lines and costs no request), only for the replica `lines_of` names when it
    names one, with a bounded tail and at most LOG_LIMIT_BYTES (LOG_LINE_BYTES a line of a tail,
    LOG_READ_BYTES for the whole job). A container waiting to restart gives its previous run's
    lines, those that say why it stopped. A pod deleted meanwhile (404) or a container the server
    says has not started (400) has no lines. `timed` and `after` read the kubelet's time of each
    line (`timestamps=true`); `after` reads from a position (`_log_after`).
    """
    # A person waits on the page (and a web thread with them): a slow server gets a
    # bounded time for the whole read, the pod list included, not a read timeout per call.
    deadline = time.monotonic() + seconds
    timed = timed or after is not None
    pods = _job_pods(api, namespace, job_id, name=name, replica=replica, deadline=deadline, seconds=seconds)
    states = [replica_log(pod, ()) for pod in pods]
    wanted = _lines_of(states, lines_of)
    budget = LOG_READ_BYTES // max(1, sum(1 for state in states if state.replica in wanted))
    line_bytes = LOG_LINE_BYTES + (STAMP_BYTES if timed else 0)
    limit = min(LOG_LIMIT_BYTES, budget, tail * line_bytes if tail is not None else LOG_LIMIT_BYTES)
    result = []
    for pod, state in zip(pods, states):
        if state.replica not in wanted:
            result.append(replace(state, read=False))
            continue
        ran = _has_run(pod)
        if ran is None:
            result.append(state)
            continue
        what = f"read the logs of {namespace}/{pod['metadata']['name']} and the rest"
        if time.monotonic() > deadline:
            raise ClusterUnavailable(f"{what}: the cluster took more than {seconds:g} s for this "
                                     "job's logs")  # fmt: skip
        read = _Read(api, pod, namespace, deadline, seconds, what)
        if after is not None:
            result.append(replace(state, previous=ran == "previous",
                                  **read.after(after.get(state.replica, LogPosition()), tail, limit,
                                               forward=min(LOG_LIMIT_BYTES, budget), ran=ran)))  # fmt: skip
            continue
        data, cut, whole = read.tail(tail, limit, previous=ran == "previous", timestamps=timed)
        if timed:
            stamped = timed_log_lines(data, cut=cut)
            position = read.position(stamped, whole=whole, previous=ran == "previous",
                                     forward=min(LOG_LIMIT_BYTES, budget))  # fmt: skip
            result.append(replace(state, lines=tuple(line for _, line in stamped), cut=cut,
                                  previous=ran == "previous", times=tuple(when for when, _ in stamped),
                                  position=position))  # fmt: skip
        else:
            result.append(replace(state, lines=log_lines(data, cut=cut), cut=cut, previous=ran == "previous"))
    return result


def open_log(api: Api, namespace: str, job_id: int, *, replica: str, seconds: float, name: str = "") -> LogStream | None:
    """The port's `log_stream`: the whole log of the job's replica `replica`, read in chunks as it is passed on.

    The pods are listed and the log is opened (without `limitBytes`: all of it) within `seconds`; None when
    no pod is that replica. Each chunk is read with the read timeout of LOG_READ_TIMEOUT, so that a server
    that stops sending midway ends the stream (ClusterUnavailable) rather than holding the reader; how long
    the whole stream may take is its reader's to bound.
    """
    deadline = time.monotonic() + seconds
    pods = _job_pods(api, namespace, job_id, name=name, replica=replica, deadline=deadline, seconds=seconds)
    if not pods or replica_name(pods[0]) != replica:
        return None
    pod = pods[0]
    ran = _has_run(pod)
    state = replace(replica_log(pod, ()), previous=ran == "previous")
    if ran is None:
        return LogStream(state, no_bytes())  # never started: no log, and no request the server would refuse
    pod_name = pod["metadata"]["name"]
    what = f"read the log of {namespace}/{pod_name}"
    options = {"previous": True} if ran == "previous" else {}
    if container := main_container(pod):
        options["container"] = container
    with _within(deadline, seconds, what):
        response = api.call(
            "read log of", "Pod", f"{namespace}/{pod_name}", api.core.read_namespaced_pod_log, pod_name, namespace,
            tolerate=(BAD_REQUEST, NOT_FOUND), stream=True, timeout=(_time_left(deadline)[0], LOG_READ_TIMEOUT[1]),
            **options,
        )  # fmt: skip
    return LogStream(state, no_bytes() if response is None else _chunks(response, what))


def _chunks(response: urllib3.BaseHTTPResponse, what: str) -> Generator[bytes, None, None]:
    """The body of an open log read, LOG_CHUNK_BYTES at most at a time; the connection is given back once read
    to its end, closed when its reader stops before. A server that stops sending raises ClusterUnavailable."""
    sent, whole = 0, False
    try:
        for chunk in response.stream(LOG_CHUNK_BYTES):
            sent += len(chunk)
            yield chunk
        whole = True
    except urllib3.exceptions.HTTPError as error:
        cause = getattr(error, "reason", None) or error
        raise ClusterUnavailable(f"{what}: the API server stopped sending it after {sent:,} bytes: {cause}") from error
    finally:
        if whole:
            response.release_conn()
        else:
            response.close()


def _job_pods(api: Api, namespace: str, job_id: int, *, name: str, replica: str, deadline: float,
              seconds: float) -> list[dict]:  # fmt: skip
    """The job's replica pods in replica order (only `replica`'s when named), less those a job object other
    than `name` controls, listed by the `gangway.io/job-id` label within `deadline`."""
    with _within(deadline, seconds, f"list the pods of job {job_id} in {namespace}"):
        pods = api.call(
            "list", "Pod", namespace, api.core.list_namespaced_pod, namespace,
            label_selector=f"{JOB_ID_LABEL}={job_id}", timeout=_time_left(deadline),
        )["items"]
    return [pod for pod in sorted(pods, key=replica_order)
            if (not name or controller_name(pod) in ("", name)) and (not replica or replica_name(pod) == replica)]


@contextmanager
def _within(deadline: float, seconds: float, what: str) -> Iterator[None]:
    """Around one call of a logs read: a call that failed for want of time (its read timeout cut to
    the time left) says the read took too long, as the person reading the page wants to know."""
    try:
        yield
    except ClusterUnavailable as error:
        if deadline - time.monotonic() > 0.05:  # time was left (a socket timeout may end a little early)
            raise
        raise ClusterUnavailable(f"{what}: the cluster took more than {seconds:g} s for this "
                                 "job's logs") from error  # fmt: skip


class _Read:
    """The log reads of one replica pod, within the deadline of the job's whole read."""

    def __init__(self, api: Api, pod: dict, namespace: str, deadline: float, seconds: float, what: str):
        self.api, self.pod, self.namespace, self.deadline, self.seconds, self.what = (
            api, pod, namespace, deadline, seconds, what)

    def fetch(self, *, previous: bool, **query) -> bytes:
        """One read of the container's log (its previous one's); b"" when the server says there is none."""
        api, name = self.api, self.pod["metadata"]["name"]
        options = dict(query)
        container = main_container(self.pod)
        if container:  # a pod of several containers (Katib's metrics collector beside it) needs the name
            options["container"] = container
        if previous:
            options["previous"] = True
        with _within(self.deadline, self.seconds, self.what):
            return api.call(
                "read log of", "Pod", f"{self.namespace}/{name}", _read_pod_log, api.core, name, self.namespace,
                tolerate=(BAD_REQUEST, NOT_FOUND), raw=True, timeout=_time_left(self.deadline), **options,
            ) or b""  # fmt: skip

    def tail(self, tail: int | None, limit: int, *, previous: bool,
             timestamps: bool = False) -> tuple[bytes, bool, bool]:  # fmt: skip
        """The last `tail` lines (all with None) as bytes, whether the read stopped at `limit`, and whether
        they are the whole log from its start (fewer lines came than asked for, or `tail` is None).

        The kubelet applies `limitBytes` to the start of a tail: a tail of long lines cut by it would
        miss the newest. Then the tail is read once more, of as many lines as came whole (at least
        one), so that the lines shown are the last ones."""
        options = {"limit_bytes": limit, **({"timestamps": True} if timestamps else {})}
        data = self.fetch(previous=previous, **options, **({"tail_lines": tail} if tail is not None else {}))
        asked = tail
        if tail is not None and len(data) >= limit and data.count(b"\n") < tail:
            asked = max(1, data.count(b"\n"))
            data = self.fetch(previous=previous, **options, tail_lines=asked)
        cut = len(data) >= limit
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        return data, cut, asked is None or (not cut and lines < asked)

    def position(self, stamped: tuple[tuple[str, str], ...], *, whole: bool, previous: bool,
                 forward: int) -> LogPosition:  # fmt: skip
        """The position after the last of `stamped`, the newest lines of the log (`whole`: all of it).

        The lines of the last line's time are counted back through `stamped`. When every line of it
        shares that time and lines may come before it (a burst the runtime stamped at once, longer than
        the tail), the count would miss those before it and the next read would give them again, out
        of order, with the tail's own lines: they are counted by one more read, forward from that time's
        second (at most `forward` bytes; should the burst be longer still, the count is what that read
        holds, never less than the tail's)."""
        position = position_after(stamped)
        if whole or not stamped or position.count < len(stamped):
            return position
        data = self.fetch(previous=previous, timestamps=True, limit_bytes=forward,
                          since_time=position.time[:19] + "Z")  # fmt: skip
        same = sum(1 for when, _ in timed_log_lines(data, cut=len(data) >= forward) if when == position.time)
        return LogPosition(position.time, max(same, position.count))

    def after(self, position: LogPosition, tail: int | None, limit: int, *, forward: int, ran: str) -> dict:
        """The ReplicaLog fields of the lines written after `position`: the newest `tail` of them, and those
        left out before them (`skipped`).

        The log is read forward from the position's second (`sinceTime`, which the API server passes on
        to the kubelet in whole seconds), at most `forward` bytes, with each line's time; the lines up to
        the position are dropped by their time and count. When the read holds the line at the position,
        no line was lost between; when it does not, the log it was in is gone (a container restarted
        twice, a pod replaced, a log rotated) and the count is a lower bound. A container restarted since
        the position has its previous container's lines read first: times go on from one to the next.
        When more than `forward` bytes came after the position, the newest lines are read as a tail and
        the lines counted before them are a lower bound too.
        """
        since = {"since_time": position.time[:19] + "Z"} if position.time else {}
        if ran == "previous":
            containers = (True,)  # it waits to start again: its previous container's log is the one it has
        else:
            containers = (True, False) if _restarted_since(self.pod, position) else (False,)
        found, anchored, cut = [], not position.time, False
        for previous in containers:
            data = self.fetch(previous=previous, timestamps=True, limit_bytes=forward, **since)
            stopped = len(data) >= forward
            stamped = timed_log_lines(data, cut=stopped)
            if stopped and not data.endswith(b"\n") and len(stamped) > 1:
                stamped = stamped[:-1]  # the last line came in part: the next read has it whole
            lines, seen = lines_after(stamped, position)
            found, anchored, cut = found + lines, anchored or seen, cut or stopped
        count = len(found) if tail is None else tail
        if not cut:
            skipped = max(0, len(found) - count)
            shown = found[skipped:]
            return {"lines": tuple(line for _, line in shown), "times": tuple(when for when, _ in shown),
                    "position": position_after(found, position), "skipped": skipped, "skipped_exact": anchored}
        # More came after the position than one read counts: the newest lines, read as a tail, come after
        # all those counted, and more may lie between the two reads.
        data, stopped, whole = self.tail(tail, limit, previous=ran == "previous", timestamps=True)
        last = found[-1][0] if found else position.time
        stamped = timed_log_lines(data, cut=stopped)
        newest = tuple(line for line in stamped if line[0] > last)
        if newest:
            shown, skipped = newest, len(found)
            # Lines of the newest ones' time may come before the tail only when all of the tail is newer.
            after = self.position(newest, whole=whole or len(newest) < len(stamped), previous=ran == "previous",
                                  forward=forward)  # fmt: skip
        else:  # nothing newer than the lines counted (the rest shares the last one's time): the newest of those
            shown = found[max(0, len(found) - count):]
            skipped, after = len(found) - len(shown), position_after(found, position)
        return {"lines": tuple(line for _, line in shown), "times": tuple(when for when, _ in shown),
                "position": after, "skipped": skipped, "skipped_exact": False, "cut": stopped}


def _read_pod_log(core, name: str, namespace: str, *, since_time: str | None = None, **options):
    """The client's read_namespaced_pod_log, and with `since_time` (which its generated method lacks: the API's
    `sinceTime`, RFC 3339) the same request made through its ApiClient."""
    if since_time is None:
        return core.read_namespaced_pod_log(name, namespace, **options)
    names = {"container": "container", "limit_bytes": "limitBytes", "previous": "previous",
             "tail_lines": "tailLines", "timestamps": "timestamps"}  # fmt: skip
    query = [("sinceTime", since_time)] + [
        (names[key], str(value).lower() if isinstance(value, bool) else value)
        for key, value in options.items() if key in names
    ]  # fmt: skip
    return core.api_client.call_api(
        "/api/v1/namespaces/{namespace}/pods/{name}/log", "GET", {"name": name, "namespace": namespace}, query,
        {"Accept": "text/plain"}, auth_settings=["BearerToken"], response_type="str",
        _return_http_data_only=True, _preload_content=options.get("_preload_content", True),
        _request_timeout=options.get("_request_timeout"),
    )  # fmt: skip


def _restarted_since(pod: dict, position: LogPosition) -> bool:
    """Whether the replica's container stopped (and was started again) at or after `position`'s second, so
    that its previous container's log may hold lines after it."""
    if not position.time:
        return False
    container = main_container(pod)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    main = next((s for s in statuses if s.get("name") == container), statuses[0] if statuses else {})
    finished = ((main.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
    return finished[:19] >= position.time[:19]


def _time_left(deadline: float) -> tuple[float, float]:
    """LOG_READ_TIMEOUT cut to the time left before `deadline` (a little at least, so that the call is made)."""
    left = max(deadline - time.monotonic(), 0.05)
    connect, read = LOG_READ_TIMEOUT
    return min(connect, left), min(read, left)


def _lines_of(states: list[ReplicaLog], lines_of: str | None) -> set[str]:
    """The replicas whose lines a read asks for: all, the one named, or (PICK) the failing one, else the first."""
    if lines_of is None:
        return {state.replica for state in states}
    if lines_of == PICK:
        chosen = failing_replica(states) or (states[0] if states else None)
        return {chosen.replica} if chosen else set()
    return {lines_of}


def _has_run(pod: dict) -> str | None:
    """Whether a replica's training container has a log: "current" once it started, "previous" while it
    waits to start again after it stopped (CrashLoopBackOff: the log of its last run says why), None
    before it ever started (unscheduled, pulling its image), when a read would only be refused."""
    container = main_container(pod)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    main = next((s for s in statuses if s.get("name") == container), statuses[0] if statuses else {})
    state = main.get("state") or {}
    if "running" in state or "terminated" in state:
        return "current"
    if (main.get("lastState") or {}).get("terminated"):
        return "previous"
    if not main and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Running"):
        return "current"  # a pod whose statuses are gone (evicted): the server says whether it kept a log
    return None
