"""The Kubernetes adapter of the Cluster port: the official client against a real cluster.

Jobs are of the kinds `jobs.kinds` registers, built by
`job_manifests.job_manifest`; the label `gangway.io/job-id` joins each one, and
every pod it owns, to its Gangway job. Every call goes through
`kubernetes_api.Api.call`, which turns HTTP answers into success,
`ClusterError` or `ClusterUnavailable`.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from kubernetes import config
from kubernetes.client import ApiClient, Configuration

from jobs import kinds
from scheduling.cluster import job_manifests, kubernetes_outside, kubernetes_tenants, manifests, outside
from scheduling.cluster.base import (
    LOG_LIMIT_BYTES,
    LOG_LINE_BYTES,
    LOG_READ_BYTES,
    LOG_TAIL,
    PICK,
    ClaimInfo,
    ClusterError,
    ClusterJob,
    ClusterUnavailable,
    Finding,
    JobStatus,
    JobStatuses,
    LogPosition,
    NodeInfo,
    OutsideJob,
    OutsideJobs,
    OutsidePod,
    Phase,
    ReplicaLog,
    Tenants,
    TrialResult,
    check_claims,
    failing_replica,
)
from scheduling.cluster.kubernetes_api import (
    BAD_REQUEST,
    CONFLICT,
    NOT_FOUND,
    Api,
    amount,
    client_for,
    definition_installed,
)
from scheduling.cluster.log_text import STAMP_BYTES, lines_after, log_lines, position_after, timed_log_lines
from scheduling.cluster.manifests import JOB_ID_LABEL

# Taints that keep pods off a node, unless the pod tolerates them.
BLOCKING_TAINTS = {"NoSchedule", "NoExecute"}
# A job's logs are read while a person waits (and gunicorn times a request out at 60 s): each pod's
# log gets a short read timeout, and the whole job's read a deadline, past which it is unavailable.
LOG_READ_TIMEOUT = (5.0, 10.0)
LOGS_DEADLINE = 20.0
# The pods that hold room on a node, as a field selector (the server filters on these fields for pods):
# bound to one and not ended.
HOLDING_ROOM = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"



class KubernetesCluster:
    """The Cluster port over the Kubernetes API (see `scheduling.cluster.base.Cluster`)."""

    def __init__(self, api_client: ApiClient, *, retry_budget: float = 3.0):
        self.api = Api(api_client, retry_budget=retry_budget)
        self.logs_deadline = LOGS_DEADLINE

    @classmethod
    def from_environment(cls) -> "KubernetesCluster":
        """Returns an adapter for the in-cluster service account, else for KUBECONFIG (or ~/.kube/config).

        Raises ClusterUnavailable when neither is configured.
        """
        try:
            config.load_incluster_config()
        except config.ConfigException:
            try:
                # Read now: the client reads KUBECONFIG once, when it is imported.
                config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
            except (config.ConfigException, OSError) as error:
                raise ClusterUnavailable(
                    "No Kubernetes configuration: not running in a cluster, and KUBECONFIG "
                    f"(or ~/.kube/config) could not be loaded: {error}"
                ) from error
        return cls(client_for(Configuration.get_default_copy()))

    # -- reading the cluster -------------------------------------------------

    def _nodes(self) -> list[dict]:
        """Returns every Node object as the API server sends it."""
        return self.api.list_all("Node", "*", self.api.core.list_node)

    def nodes(self) -> list[NodeInfo]:
        """Returns schedulable nodes by name, with allocatable GPUs, cpu millicores and memory bytes.

        Cordoned nodes and nodes with a NoSchedule or NoExecute taint that
        Gangway's pods do not tolerate (see `manifests.TOLERATIONS`) are left out.
        """
        result = []
        for node in self._nodes():
            spec = node.get("spec") or {}
            if spec.get("unschedulable") or any(
                taint.get("effect") in BLOCKING_TAINTS and not tolerated(taint)
                for taint in spec.get("taints") or ()
            ):
                continue
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            result.append(NodeInfo(
                name=node["metadata"]["name"],
                gpu=amount("gpu", allocatable.get(manifests.RESOURCE_NAMES["gpu"])),
                cpu=amount("cpu", allocatable.get("cpu")),
                memory=amount("memory", allocatable.get("memory")),
                labels=tuple(sorted((node["metadata"].get("labels") or {}).items())),
            ))
        return sorted(result, key=lambda node: node.name)

    def outside_usage(self) -> list[OutsidePod]:
        """Returns pods Gangway did not create that hold room on a node (running, or pending but bound).

        The server sends only those (`HOLDING_ROOM`): on a large cluster most pods without Gangway's
        label are the completed pods of CronJobs and batch work, which hold nothing. They are checked
        here again all the same, as the scheduler counts them.
        """
        pods = self.api.list_all(
            "Pod", "*", self.api.core.list_pod_for_all_namespaces,
            label_selector=f"!{JOB_ID_LABEL}", field_selector=HOLDING_ROOM,
        )
        result = []
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if node and phase in ("Running", "Pending"):
                result.append(_bound_pod(pod, node))
        return result

    # -- jobs ------------------------------------------------------------------

    def create_job(self, job: ClusterJob) -> None:
        """Creates the job; when it exists suspended, resumes it with the current attempt's pods.

        Returns nothing. The name is deterministic, so a retried create finds
        the job it made before. An adopted job exists already: it is admitted in place.
        """
        self._create(job, dry_run=False)

    def check_create(self, job: ClusterJob) -> None:
        """Asks the API server to try `create_job` as a dry run (`dryRun=All`): admission webhooks, quota
        and validation answer as they would, and nothing is stored. Returns nothing; raises what the
        create would. A webhook that cannot be dry-run (400 "does not support dry run") passes unchecked."""
        try:
            self._create(job, dry_run=True)
        except ClusterError as error:
            if not _dry_run_unsupported(error):
                raise

    def _create(self, job: ClusterJob, *, dry_run: bool) -> None:
        mode = {"dry_run": "All"} if dry_run else {}
        if job.adopted:
            kubernetes_outside.admit(self.api, job, dry_run=dry_run)
            return
        check_claims(self, job)
        desired = job_manifests.job_manifest(job)
        kind = kinds.get(job.kind)
        args = (kind.group, kind.version, job.namespace, kind.plural)
        what = f"{job.namespace}/{job.name}"
        verb = "try to create" if dry_run else "create"
        created = self.api.call(
            verb, job.kind, what, self.api.custom.create_namespaced_custom_object,
            *args, desired, tolerate=(CONFLICT,), **mode,
        )
        if created is not None:
            return
        existing = self.api.call(
            "read", job.kind, what, self.api.custom.get_namespaced_custom_object, *args, job.name,
        )
        if not job_manifests.is_suspended(kind, existing):
            return
        self.api.call(
            "try to resume" if dry_run else "resume", job.kind, what, self.api.custom.patch_namespaced_custom_object,
            *args, job.name, job_manifests.resume_patch(job), **mode,
        )

    def suspend_job(self, job: ClusterJob) -> None:
        """Sets the kind's suspend flag (`runPolicy.suspend`...); the operator stops the pods after their grace period.

        Returns nothing; a job that no longer exists is already stopped.
        """
        kind = kinds.get(job.kind)
        self.api.call(
            "suspend", job.kind, f"{job.namespace}/{job.name}",
            self.api.custom.patch_namespaced_custom_object,
            kind.group, kind.version, job.namespace, kind.plural, job.name,
            job_manifests.suspend_patch(kind), tolerate=(NOT_FOUND,), one_object=True,
        )

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        """Deletes the one object of that kind and name, in one call; its pods follow (background propagation).

        Returns nothing; a job that no longer exists (404) is already deleted. An object of another
        kind with the same name (a person's own PyTorchJob beside a Gangway TFJob) is left alone.
        """
        job_kind = kinds.get(kind)
        self.api.call(
            "delete", kind, f"{namespace}/{name}",
            self.api.custom.delete_namespaced_custom_object,
            job_kind.group, job_kind.version, namespace, job_kind.plural, name,
            propagation_policy="Background", tolerate=(NOT_FOUND,), one_object=True,
        )

    def job_statuses(self) -> JobStatuses:
        """Returns every job labelled with a Gangway job id, its phase and its running pods, and the
        labelled pods bound to a node that belong to none of those jobs (`JobStatuses.strays`).

        Pods are found by the same `gangway.io/job-id` label, which they
        inherit from the job's templates; it does not depend on the labels
        a given Training Operator version adds. A copy of a job's object in
        the same namespace keeps that label on its pods too: a pod whose
        owner is a job object is that object's only (`_owning_job`), and a
        pod whose owner is gone (a deleted job's, still terminating, even
        once its job is created again under the same name) is a stray.
        The pods are listed before the jobs, so none is missed: a job created
        in between has no pods yet, and the pods of one deleted in between are strays.
        """
        # Every labelled pod, ended and unbound ones too: a failed job's message is read from its pods'
        # states, and a pod that succeeded may still say a container was OOMKilled.
        pods = self.api.list_all(
            "Pod", "*", self.api.core.list_pod_for_all_namespaces, label_selector=JOB_ID_LABEL,
        )
        running: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        bound: dict[tuple[str, str, str], list[OutsidePod]] = defaultdict(list)
        owned: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
        claimed: set[tuple[str, str, str]] = set()  # the pods' keys some job object found takes
        for pod in pods:
            meta = pod["metadata"]
            key = (meta.get("namespace", ""), meta["labels"][JOB_ID_LABEL], _owning_job(pod))
            owned[key].append(pod)
            phase, node = (pod.get("status") or {}).get("phase"), (pod.get("spec") or {}).get("nodeName", "")
            if phase == "Running":
                running[key].append(node)
            if node and phase in ("Running", "Pending"):
                bound[key].append(_bound_pod(pod, node))
        result = []
        for kind in kinds.all_kinds():
            # A kind whose CRD the cluster lacks (the Training Operator without Kubeflow Trainer) answers
            # 404: none of its jobs can exist there, and the other kinds are still read.
            jobs = self.api.list_all(
                kind.name, "*", self.api.custom.list_cluster_custom_object,
                kind.group, kind.version, kind.plural, label_selector=JOB_ID_LABEL, tolerate=(NOT_FOUND,),
            )  # fmt: skip
            if jobs is None and self._installed(kind):
                # API servers now and then answer 404 for a custom resource that exists: read as "none",
                # every running job of the kind would look gone (created again, or a victim requeued early).
                raise ClusterUnavailable(f"list {kind.name} *: 404 Not Found, though its CustomResourceDefinition "
                                         "is installed; read again at the next pass")  # fmt: skip
            for obj in jobs or ():
                meta = obj["metadata"]
                label = meta["labels"][JOB_ID_LABEL]
                if not label.isdigit():
                    continue
                key = (meta["namespace"], label, meta.get("uid", ""))
                claimed.update(_keys_of_job(key))
                nodes = sorted(_of_job(running, key))
                phase, message = job_phase(kind, obj, running_pods=len(nodes))
                if phase is Phase.FAILED:
                    message = failure_sentence(_of_job(owned, key), message)
                result.append(JobStatus(
                    job_id=int(label), name=meta["name"], namespace=meta["namespace"], kind=kind.name,
                    phase=phase, message=message, running_pods=len(nodes), nodes=tuple(nodes),
                    pods=tuple(_of_job(bound, key)),
                    adopted=not outside.created_by_gangway(obj),
                ))
        strays = [pod for key, of_key in bound.items() if key not in claimed for pod in of_key]
        return JobStatuses(sorted(result, key=lambda status: status.job_id),
                           sorted(strays, key=lambda pod: (pod.namespace, pod.name)))  # fmt: skip

    def _installed(self, kind: kinds.JobKind) -> bool:
        """Whether the cluster has the kind's CustomResourceDefinition (one small list by name)."""
        return definition_installed(self.api, f"{kind.plural}.{kind.group}")

    def logs(self, namespace: str, job_id: int, *, name: str = "", replica: str = "",
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
        # A person waits on the page (and the web worker's own timeout on it): a slow server gets a
        # bounded time for the whole read, the pod list included, not a read timeout per call.
        deadline = time.monotonic() + self.logs_deadline
        timed = timed or after is not None
        with self._within(deadline, f"list the pods of job {job_id} in {namespace}"):
            pods = self.api.call(
                "list", "Pod", namespace, self.api.core.list_namespaced_pod, namespace,
                label_selector=f"{JOB_ID_LABEL}={job_id}", timeout=_time_left(deadline),
            )["items"]
        pods = [pod for pod in sorted(pods, key=replica_order)
                if (not name or _controller_name(pod) in ("", name)) and (not replica or replica_name(pod) == replica)]
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
                raise ClusterUnavailable(f"{what}: the cluster took more than {self.logs_deadline:g} s for this "
                                         "job's logs")  # fmt: skip
            read = _Read(self, pod, namespace, deadline, what)
            if after is not None:
                result.append(replace(state, previous=ran == "previous",
                                      **read.after(after.get(state.replica, LogPosition()), tail, limit,
                                                   forward=min(LOG_LIMIT_BYTES, budget), ran=ran)))  # fmt: skip
                continue
            data, cut = read.tail(tail, limit, previous=ran == "previous", timestamps=timed)
            if timed:
                stamped = timed_log_lines(data, cut=cut)
                result.append(replace(state, lines=tuple(line for _, line in stamped), cut=cut,
                                      previous=ran == "previous", times=tuple(when for when, _ in stamped),
                                      position=position_after(stamped)))  # fmt: skip
            else:
                result.append(replace(state, lines=log_lines(data, cut=cut), cut=cut, previous=ran == "previous"))
        return result

    @contextmanager
    def _within(self, deadline: float, what: str) -> Iterator[None]:
        """Around one call of a logs read: a call that failed for want of time (its read timeout cut to
        the time left) says the read took too long, as the person reading the page wants to know."""
        try:
            yield
        except ClusterUnavailable as error:
            if deadline - time.monotonic() > 0.05:  # time was left (a socket timeout may end a little early)
                raise
            raise ClusterUnavailable(f"{what}: the cluster took more than {self.logs_deadline:g} s for this "
                                     "job's logs") from error  # fmt: skip

    def outside_jobs(self) -> OutsideJobs:
        """Returns every TFJob, PyTorchJob or TrainJob labelled `gangway.io/queue` that Gangway did not create,
        and the kinds whose list the cluster answered."""
        return kubernetes_outside.outside_jobs(self.api)

    def mark_outside(self, job: OutsideJob, *, job_id: int | None = None, rejected: str = "") -> None:
        """Labels an outside job with its Gangway job, or annotates why it was refused. Returns nothing."""
        kubernetes_outside.mark(self.api, job, job_id=job_id, rejected=rejected)

    def trials(self) -> list[TrialResult]:
        """Returns every Katib trial with its objective; empty when Katib is not installed."""
        return kubernetes_outside.trials(self.api)

    # -- tenants and health --------------------------------------------------

    def claims(self, namespace: str) -> list[ClaimInfo]:
        """Returns the PersistentVolumeClaims of a namespace by name; empty when there are none."""
        items = self.api.call(
            "list", "PersistentVolumeClaim", namespace,
            self.api.core.list_namespaced_persistent_volume_claim, namespace,
        )["items"]
        result = []
        for claim in items:
            status = claim.get("status") or {}
            result.append(ClaimInfo(
                namespace=namespace, name=claim["metadata"]["name"],
                capacity=amount("memory", (status.get("capacity") or {}).get("storage")),
                access_modes=tuple(status.get("accessModes") or (claim.get("spec") or {}).get("accessModes") or ()),
                phase=status.get("phase", ""),
            ))
        return sorted(result, key=lambda claim: claim.name)

    def sync_tenants(self, tenants: Tenants) -> list[str]:
        """Returns one line per object created or changed; empty when the cluster already matched."""
        return kubernetes_tenants.sync(self.api, tenants)

    def doctor(self, tenants: Tenants) -> list[Finding]:
        """Returns what keeps Gangway from working on this cluster; empty when all is well."""
        findings = kubernetes_tenants.doctor(self.api, tenants, self._nodes(), self.nodes())
        return findings + kubernetes_outside.doctor(self.api, tenants)


class _Read:
    """The log reads of one replica pod, within the deadline of the job's whole read."""

    def __init__(self, cluster: KubernetesCluster, pod: dict, namespace: str, deadline: float, what: str):
        self.cluster, self.pod, self.namespace, self.deadline, self.what = cluster, pod, namespace, deadline, what

    def fetch(self, *, previous: bool, **query) -> bytes:
        """One read of the container's log (its previous one's); b"" when the server says there is none."""
        api, name = self.cluster.api, self.pod["metadata"]["name"]
        options = dict(query)
        container = main_container(self.pod)
        if container:  # a pod of several containers (Katib's metrics collector beside it) needs the name
            options["container"] = container
        if previous:
            options["previous"] = True
        with self.cluster._within(self.deadline, self.what):
            return api.call(
                "read log of", "Pod", f"{self.namespace}/{name}", _read_pod_log, api.core, name, self.namespace,
                tolerate=(BAD_REQUEST, NOT_FOUND), raw=True, timeout=_time_left(self.deadline), **options,
            ) or b""  # fmt: skip

    def tail(self, tail: int | None, limit: int, *, previous: bool, timestamps: bool = False) -> tuple[bytes, bool]:
        """The last `tail` lines (all with None) as bytes, and whether the read stopped at `limit`.

        The kubelet applies `limitBytes` to the start of a tail: a tail of long lines cut by it would
        miss the newest. Then the tail is read once more, of as many lines as came whole (at least
        one), so that the lines shown are the last ones."""
        options = {"limit_bytes": limit, **({"timestamps": True} if timestamps else {})}
        data = self.fetch(previous=previous, **options, **({"tail_lines": tail} if tail is not None else {}))
        if tail is not None and len(data) >= limit and data.count(b"\n") < tail:
            data = self.fetch(previous=previous, **options, tail_lines=max(1, data.count(b"\n")))
        return data, len(data) >= limit

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
        data, stopped = self.tail(tail, limit, previous=ran == "previous", timestamps=True)
        last = found[-1][0] if found else position.time
        newest = [line for line in timed_log_lines(data, cut=stopped) if line[0] > last]
        if newest:
            shown, skipped, after = newest, len(found), position_after(newest)
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


def tolerated(taint: dict) -> bool:
    """Returns whether every Gangway pod tolerates the taint."""
    return any(
        toleration["key"] == taint.get("key")
        and (toleration["operator"] == "Exists" or toleration.get("value") == taint.get("value"))
        and toleration.get("effect") in (None, taint.get("effect"))
        for toleration in manifests.TOLERATIONS
    )


def job_phase(kind: kinds.JobKind, obj: dict, *, running_pods: int = 0) -> tuple[Phase, str]:
    """Returns the phase of a job and the message of the condition that decided it.

    The phase is the kind's most decisive true condition (a job that finished
    after a restart keeps an old Restarting condition, so the kind lists the
    terminal ones first). A job asked to suspend counts as suspended before
    the operator says so; a job with no true condition yet is Created, or
    Running once its pods run when its operator has no Running condition.
    """
    true = {
        c.get("type"): c.get("message", "")
        for c in (obj.get("status") or {}).get("conditions") or ()
        if c.get("status") == "True"
    }
    decided = next(((Phase(phase), true[condition]) for condition, phase in kind.conditions if condition in true), None)
    phase, message = decided or (Phase.CREATED, "")
    if job_manifests.is_suspended(kind, obj) and phase not in (Phase.FAILED, Phase.SUCCEEDED):
        return Phase.SUSPENDED, message if phase is Phase.SUSPENDED and message else "Suspended by Gangway."
    if phase is Phase.CREATED and running_pods and Phase.RUNNING not in {Phase(p) for _, p in kind.conditions}:
        return Phase.RUNNING, ""
    return phase, message


def _owning_job(pod: dict) -> str:
    """The uid of the job object that controls the pod; "" when none does (a TrainJob's pods belong to
    its JobSet's Jobs): such a pod goes by its label alone.

    The uid, not the name: a job deleted and created again under its deterministic name is another
    object, and the pods of the deleted one, still terminating, are not the new one's."""
    return _controller(pod).get("uid", "")


def _controller_name(pod: dict) -> str:
    """The name of the job object that controls the pod; "" when none does."""
    return _controller(pod).get("name", "")


def _controller(pod: dict) -> dict:
    """The pod's ownerReference to the job object that controls it (one of a job kind); {} when none does."""
    job_kinds = kinds.names()
    return next((ref for ref in pod["metadata"].get("ownerReferences") or ()
                 if ref.get("controller") and ref.get("kind") in job_kinds), {})  # fmt: skip


def _keys_of_job(key: tuple[str, str, str]) -> tuple[tuple[str, str, str], ...]:
    """The keys of the pods (by namespace, job-id label and owning job's uid) that go to the job object
    `key`: those it owns, and those no job object owns."""
    namespace, label, _ = key
    return key, (namespace, label, "")


def _of_job(pods: dict[tuple[str, str, str], list], key: tuple[str, str, str]) -> list:
    """What `pods` (by namespace, job-id label and owning job's uid) holds for the job object `key`."""
    return [pod for of_key in _keys_of_job(key) for pod in pods.get(of_key, ())]


def _bound_pod(pod: dict, node: str) -> OutsidePod:
    """Returns a pod bound to `node` with the room it takes there."""
    return OutsidePod(namespace=pod["metadata"].get("namespace", ""), name=pod["metadata"]["name"], node=node,
                      **pod_requests(pod))  # fmt: skip


def failure_sentence(pods: list[dict], message: str) -> str:
    """The failed job's message led by its failing replica, read from its pods' states.

    "Replica worker-1 exited with code 137 (OOMKilled: it used more memory than its limit and
    was killed). TFJob maps/resnet-g12 has failed..."; the operator's message alone when no
    replica says why.
    """
    failure = failing_replica([replica_log(pod, ()) for pod in pods])
    if failure is None:
        return message
    how = f"exited with code {failure.exit_code}" if failure.exit_code is not None else "failed"
    why = f"{failure.reason}: {failure.explanation}" if failure.explanation else failure.reason
    head = f"Replica {failure.replica} {how}" + (f" ({why})" if why else "") + "."
    return f"{head} {message}".strip()


def _replica_labels(pod: dict) -> tuple[str, str]:
    """Returns (role, index) of a replica pod from the labels its kind's operator puts on it; ("", "") when none."""
    labels = pod["metadata"].get("labels") or {}
    for kind in kinds.all_kinds():
        role, index = labels.get(kind.pod_role_label), labels.get(kind.pod_index_label)
        if role and index is not None:
            return role, index
    return "", ""


def replica_name(pod: dict) -> str:
    """Returns "worker-0" for a replica pod (from its operator's labels), else the pod's name."""
    role, index = _replica_labels(pod)
    return f"{role.lower()}-{index}" if role else pod["metadata"]["name"]


def replica_order(pod: dict) -> tuple:
    role, index = _replica_labels(pod)
    return (role.lower(), int(index) if index.isdigit() else 0, pod["metadata"]["name"])


DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


def main_container(pod: dict) -> str | None:
    """Returns the name of a replica pod's training container: the one its annotation names as
    the default, else the one its kind's operator looks for ("tensorflow", "pytorch", "node"),
    else the first; None when the pod lists none."""
    named = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER)
    if named:
        return named
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
    trainers = {kind.container for kind in kinds.all_kinds()}
    return next((name for name in names if name in trainers), names[0] if names else None)


def replica_log(pod: dict, lines: tuple[str, ...]) -> ReplicaLog:
    """Returns a replica pod's log lines with how its container stopped or why it cannot start.

    An evicted pod says so on the pod; a container says it on its state: terminated (exit code
    and reason), or running or waiting after a failed run, when the last termination (an
    OOMKilled worker restarted in place) is what a person wants to see, or waiting to start
    (ImagePullBackOff).
    """
    status = pod.get("status") or {}
    phase = status.get("phase", "")
    if status.get("reason") == "Evicted":
        return ReplicaLog(replica=replica_name(pod), pod=pod["metadata"]["name"], phase=phase, lines=lines,
                          reason="Evicted", message=status.get("message", ""))  # fmt: skip
    statuses = status.get("containerStatuses") or [{}]
    container = main_container(pod)
    # The kubelet lists statuses by name, so a sidecar may come first.
    main = next((s for s in statuses if s.get("name") == container), statuses[0])
    state = main.get("state") or {}
    last = (main.get("lastState") or {}).get("terminated")
    terminated = state.get("terminated") or (last if last and last.get("exitCode") else None)
    exit_code, reason, message, finished = None, "", "", None
    if terminated:
        exit_code, reason = terminated.get("exitCode"), terminated.get("reason", "")
        message, finished = terminated.get("message", ""), _time(terminated.get("finishedAt"))
    elif "waiting" in state:
        reason, message = state["waiting"].get("reason", ""), state["waiting"].get("message", "")
    return ReplicaLog(
        replica=replica_name(pod), pod=pod["metadata"]["name"], phase=phase, lines=lines,
        exit_code=exit_code, reason=reason, message=message, finished_at=finished,
    )  # fmt: skip


def _time(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def pod_requests(pod: dict) -> dict[str, int]:
    """Returns what a pod asks of its node: {"gpu", "cpu", "memory"} in Gangway units.

    As the scheduler counts it: the sum over containers, or the largest
    init container when that is more, plus the pod's overhead. A container
    with a limit and no request asks for its limit.
    """
    spec = pod.get("spec") or {}

    def asked(container: dict, resource: str) -> int:
        resources = container.get("resources") or {}
        name = manifests.RESOURCE_NAMES[resource]
        value = (resources.get("requests") or {}).get(name, (resources.get("limits") or {}).get(name))
        return amount(resource, value)

    total = {}
    for resource, name in manifests.RESOURCE_NAMES.items():
        containers = sum(asked(c, resource) for c in spec.get("containers") or ())
        init = max((asked(c, resource) for c in spec.get("initContainers") or ()), default=0)
        overhead = amount(resource, (spec.get("overhead") or {}).get(name))
        total[resource] = max(containers, init) + overhead
    return total


def _dry_run_unsupported(error: ClusterError) -> bool:
    """Whether the API server refused a dry run because an admission webhook on the way does not
    declare itself free of side effects: nothing was checked, and nothing is known against the create."""
    cause = error.__cause__
    return getattr(cause, "status", None) == BAD_REQUEST and "does not support dry run" in str(error)
