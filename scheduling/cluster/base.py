"""The Cluster port: the only way the loop and the commands reach a cluster.

Two adapters implement it: `simulated` (nodes and jobs kept in the database,
the default) and `kubernetes` (the official client). Everything crossing the
port is a plain frozen dataclass so the adapters stay swappable and the
manifest builders stay pure.
"""

from __future__ import annotations

import enum
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

LOG_TAIL = 100  # lines of each replica's log a page or the API shows unless asked for more
LOG_TAIL_MAX = 5000
LOG_LIMIT_BYTES = 8 * 1024**2  # the most of one replica's log one read of lines holds (a download streams it all)
# A tail's read asks for at most LOG_LINE_BYTES per line, and a job's read for at most LOG_READ_BYTES over all
# its replicas (64 replicas of a tail of 5000 lines would otherwise be 64 x 8 MB in one web worker's answer).
LOG_LINE_BYTES = 2 * 1024
LOG_READ_BYTES = 32 * 1024**2
PICK = "*"  # `lines_of`: the failing replica's lines, else the first replica's
# A log streamed whole (`log_stream`, a download) is read and passed on this many bytes at a time at most: what
# one download holds in memory, however long the log.
LOG_CHUNK_BYTES = 64 * 1024

# Why a replica's container stopped or cannot start, as Kubernetes names it, with what it means for a person.
FAILURE_REASONS = {
    "OOMKilled": "it used more memory than its limit and was killed",
    "Error": "its process exited with an error",
    "ImagePullBackOff": "its image could not be pulled (a wrong name or tag, or no access to the registry)",
    "ErrImagePull": "its image could not be pulled (a wrong name or tag, or no access to the registry)",
    "InvalidImageName": "its image name is not valid",
    "CrashLoopBackOff": "it crashed again each time it was restarted",
    "Evicted": "its node ran short of memory or disk and evicted it",
    "ContainerCannotRun": "its command could not be started",
    "CreateContainerConfigError": "its container could not be configured (a missing config map or claim?)",
    "DeadlineExceeded": "the job ran past its max runtime",
}


class ClusterUnavailable(Exception):
    """The cluster could not be reached or kept failing; nothing was changed by this call.

    `status` is the HTTP status it kept answering, None when it did not answer at all."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class NoAnswer(ClusterUnavailable):
    """The server took the request and did not answer it within the read timeout: a slow webhook on one
    object, or a server that answers nothing. It may have applied the request all the same."""


class ClusterError(Exception):
    """The cluster refused a request (e.g. 422 Invalid); the message names the object's kind and name."""


class ChangedOutside(ClusterError):
    """An adopted job's object that its owner changed since its adoption to ask otherwise than Gangway counted
    (`outside.demand_change`), which Gangway leaves suspended; `changed` says how, for people."""

    def __init__(self, message: str, *, changed: str):
        super().__init__(message)
        self.changed = changed


class ServerFailing(ClusterError):
    """The server kept failing (500) on one object while it answered a read: a webhook or the storage
    behind that object's namespace, which passes once mended; the object itself was not refused.
    `unanswered` when it took the request and did not answer in time (`NoAnswer`): it may have applied it."""

    def __init__(self, message: str, *, unanswered: bool = False):
        super().__init__(message)
        self.unanswered = unanswered


class SyncIncomplete(ClusterError):
    """Tenant sync went through every object, but the cluster refused some: `changes` were made
    (one line each, as `sync_tenants` returns them), `failures` say what was refused and why."""

    def __init__(self, changes: list[str], failures: list[str]):
        super().__init__(f"{len(failures)} of the tenants' objects could not be brought in line: " + "; ".join(failures))
        self.changes = changes
        self.failures = failures


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node and what it can allocate (cpu millicores, memory bytes)."""

    name: str
    gpu: int
    cpu: int
    memory: int
    # The node's labels, as (key, value) pairs sorted by key: a GPU type is told by one of them.
    labels: tuple[tuple[str, str], ...] = ()
    # Why it takes no new pods, "" when it takes them: "cordoned" (spec.unschedulable, as for a drain),
    # or "tainted <key>" (a NoSchedule or NoExecute taint Gangway's pods do not tolerate). Such a node
    # counts only for R10 (whether a job could ever fit); nothing is placed on it.
    unschedulable: str = ""

    @property
    def schedulable(self) -> bool:
        return not self.unschedulable


@dataclass(frozen=True, slots=True)
class TypeLabel:
    """One GPU type as the cluster tells it: its nodes carry `label` = `value`."""

    name: str
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class OutsidePod:
    """A pod Gangway did not create, holding room on a node (R12)."""

    namespace: str
    name: str
    node: str
    gpu: int = 0
    cpu: int = 0
    memory: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    role: str
    count: int
    gpu: int
    cpu: int  # millicores
    memory: int  # bytes


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """A PersistentVolumeClaim or ConfigMap of the job's namespace, mounted in every replica."""

    source: str  # "claim" | "config_map"
    name: str
    path: str
    read_only: bool = False


def volume_mounts(volumes: list[dict]) -> tuple[VolumeMount, ...]:
    """Returns a job's stored volumes (the spec's shape: {claim | config_map, path, read_only}) as mounts."""
    mounts = []
    for volume in volumes:
        source = "claim" if "claim" in volume else "config_map"
        mounts.append(VolumeMount(source=source, name=volume[source], path=volume["path"],
                                  read_only=bool(volume.get("read_only", source == "config_map"))))  # fmt: skip
    return tuple(mounts)


@dataclass(frozen=True, slots=True)
class ClusterJob:
    """Everything an adapter needs to create one Gangway job in the cluster."""

    job_id: int
    name: str  # the deterministic cluster object name, see `cluster_name`
    namespace: str  # the team slug
    team: str
    kind: str  # a `jobs.kinds` name: TFJob, PyTorchJob...
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    replicas: tuple[ReplicaSpec, ...]
    tier: str
    grace_period: int  # seconds; becomes terminationGracePeriodSeconds
    max_runtime: int | None  # becomes activeDeadlineSeconds
    attempt: int = 1
    checkpoint_claim: str = ""  # a PersistentVolumeClaim name, or "" for none
    sim_duration: int | None = None  # simulated adapter only: how long it runs
    sim_fail: bool = False  # simulated adapter only: end in failure
    placement: tuple[str, ...] = ()  # the node the policy chose for each replica (a hint)
    # Where the job's pods report checkpoints, and the token scoped to that (GANGWAY_URL, GANGWAY_JOB_TOKEN);
    # empty when the portal's public address is not configured.
    gangway_url: str = ""
    job_token: str = ""
    volumes: tuple[VolumeMount, ...] = ()
    shm: int = 0  # bytes of a memory-backed /dev/shm; already part of each replica's memory
    runtime: str = ""  # what it runs on, for a kind that takes a runtime (e.g. a ClusterTrainingRuntime), or ""
    # Created elsewhere (kubectl, Katib, Pipelines) and adopted: admission patches the scheduling fields
    # Gangway owns and unsuspends it, instead of creating it; Gangway never deletes it.
    adopted: bool = False
    uid: str = ""  # an adopted job's object, as adopted: another object of its name is not the job
    # What a replica naming no CPU or memory gets, its team's ("cpu", "memory"): already in `replicas`.
    defaults: tuple[tuple[str, int], ...] = ()
    # The GPU type its admission gave it, and the node label (key, value) that pins its pods to
    # that type's nodes; "" and () on a cluster without types.
    gpu_type: str = ""
    gpu_type_label: tuple[str, str] | tuple[()] = ()


class Phase(enum.StrEnum):
    """Where a cluster job stands, read back from its conditions."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# The phases in which a cluster job's pods hold room, or may take it: neither suspended nor ended.
RUNS = (Phase.CREATED, Phase.RUNNING, Phase.RESTARTING)


@dataclass(frozen=True, slots=True)
class WaitingPod:
    """A replica of a job whose pod waits to start: pending (bound to a node or not), or not created yet while
    its job runs. A replica whose pod completed (Succeeded) never waits: a TFJob's workers may end one by one
    while its chief runs on."""

    replica: str  # "worker-2": its role and index, lowercase, as `ReplicaLog.replica`
    why: str = ""  # the cluster's word on it (the scheduler's message, why its container cannot start); "" if none


@dataclass(frozen=True, slots=True)
class JobStatus:
    job_id: int
    name: str
    namespace: str
    kind: str  # a `jobs.kinds` name: the kind of the object found, which a delete names
    phase: Phase
    message: str = ""
    running_pods: int = 0
    nodes: tuple[str, ...] = ()  # node of each running replica
    # Every pod of the job bound to a node (running, or pending but bound), with what it asks:
    # the loop counts these as outside usage (R12) whenever it does not count the job itself.
    pods: tuple[OutsidePod, ...] = ()
    adopted: bool = False  # created elsewhere and adopted (see OutsideJob): never deleted by Gangway
    # The replicas whose pods wait to start while the job's object is neither suspended nor ended (RUNS): a
    # pod lost with its node and made again by the operator, that no node takes or whose image cannot be
    # pulled. Only those it needs to train: an elastic job running at least the fewest replicas it trains with
    # names none of those it runs without. Reconcile evicts a running job short of replicas for
    # ADMISSION_TIMEOUT (R13); empty otherwise.
    waiting_pods: tuple[WaitingPod, ...] = ()
    # When the job's running pods last saved a checkpoint in this run, when the cluster itself knows it: the
    # simulated cluster's training, as its log says. None otherwise; the Kubernetes adapter always says None,
    # since real pods report through the checkpoint endpoint. Reconcile records it as that endpoint would (R8).
    checkpointed_at: datetime | None = None


class JobStatuses(list[JobStatus]):
    """What one read of the Gangway jobs found: the list of their statuses, which is all most callers
    read, and `strays`.

    `strays` are the pods bound to a node that carry the `gangway.io/job-id` label yet belong to no job
    object the read found: a deleted job's pods still terminating through their grace period (a cancel,
    a stop whose suspend was refused, an orphan reconcile deleted; a job created again under its name
    is another object), or a bare pod made from a Gangway pod's YAML. They hold room until they are
    gone, so the loop counts them as outside usage (R12). A pod of an object found is on that object's
    status instead, never in both, and both come from one read, so none falls between them.

    `outside`, when the read was asked for it (`Cluster.job_statuses(with_outside=True)`: reconcile's read),
    holds the jobs from elsewhere as `Cluster.outside_jobs` gives them, read in the same pass: an adopted
    object carries the `gangway.io/job-id` label, so it is read once, with the statuses; None otherwise.
    """

    def __init__(self, statuses: Iterable[JobStatus] = (), strays: Iterable[OutsidePod] = (),
                 outside: OutsideJobs | None = None):  # fmt: skip
        super().__init__(statuses)
        self.strays: tuple[OutsidePod, ...] = tuple(strays)
        self.outside = outside


@dataclass(frozen=True, slots=True)
class OutsideJob:
    """A training job created elsewhere that asks for a team's queue (the label `gangway.io/queue`).

    `job_id` is the Gangway job that adopted it (its `gangway.io/job-id` label), None before;
    `rejected` the reason Gangway wrote back on it when it refused to adopt it ("" when none).
    """

    kind: str
    namespace: str
    name: str
    uid: str
    queue: str  # the team the label names
    suspended: bool
    finished: bool
    manifest: dict
    job_id: int | None = None
    rejected: str = ""
    origin: str = ""  # where it came from, for `submitted_via` (see `outside.origin`)
    trial: str = ""  # the Katib trial that created it, and its experiment
    experiment: str = ""
    # Suspended by Gangway (its mark, `manifests.SUSPENDED_BY_ANNOTATION`), not by its owner.
    suspended_by_gangway: bool = False


@dataclass(frozen=True, slots=True)
class OutsideJobs:
    """What one read of the labelled jobs found, and the kinds it could read.

    `kinds` names each kind whose list the cluster answered; a kind left out (its operator not
    installed, or a list answered 404 for a while, as API servers do for custom resources) may
    still have jobs, so nothing of that kind may be judged gone.
    """

    jobs: tuple[OutsideJob, ...]
    kinds: frozenset[str]


@dataclass(frozen=True, slots=True)
class TrialResult:
    """What Katib reports of one trial: its objective metric's latest value, when it reported one."""

    namespace: str
    experiment: str
    trial: str
    objective: str  # the metric's name
    maximize: bool
    value: float | None
    outcome: str = ""  # once the trial completed, how (`outside.TRIAL_OUTCOMES`), else ""


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """What Katib reports of one Experiment once it has ended: how, when, and its best trial (Katib's
    `currentOptimalTrial`) with that trial's metrics, the objective first."""

    namespace: str
    experiment: str
    outcome: str  # "Succeeded" or "Failed" (`outside.EXPERIMENT_OUTCOMES`)
    ended_at: datetime | None  # its completionTime
    best_trial: str = ""  # the Trial's name, which is its job's; "" when Katib names none
    metrics: tuple[tuple[str, float], ...] = ()  # the best trial's metrics by name, as Katib ranks them


@dataclass(frozen=True, slots=True, order=True)
class LogPosition:
    """A place in a replica's log: just after the `count`-th line stamped `time`.

    `time` is the line's time as the kubelet stamps it (`timestamps=true`), in UTC with nine digits of
    fraction ("2024-05-01T10:00:00.123456789Z"), so that times compare as text. Several lines may share a
    time (a burst within a nanosecond's clock tick, or the simulated cluster's whole seconds), hence the
    count. `LogPosition()` is the start of the log.
    """

    time: str = ""
    count: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """One replica of a job: its recent log lines and, once it stopped, how (exit code and reason)."""

    replica: str  # "worker-0": the replica type and index, lowercase, as the Training Operator names pods
    pod: str
    phase: str  # the pod's phase: Pending, Running, Succeeded, Failed
    lines: tuple[str, ...] = ()
    exit_code: int | None = None
    reason: str = ""  # a FAILURE_REASONS key, "Completed", or "" while it runs
    message: str = ""
    finished_at: datetime | None = None
    previous: bool = False  # the lines are its previous container's: it waits to be started again after it stopped
    cut: bool = False  # the read stopped at its byte limit: the last line may be cut and later ones missing
    read: bool = True  # False: only its state was read, not its lines (`lines_of` named another replica)
    # A timed read (`timed`, or `after`) only: each line's time, and the position after the last line (the one
    # asked from when no line came after it), to read on from.
    times: tuple[str, ...] = ()
    position: LogPosition | None = None
    # A read `after` a position only: lines written after it that this read left out, before its first line (more
    # came than `tail`); with `skipped_exact` False, at least that many: the cluster no longer has the log the
    # position was in (a container restarted twice, a pod replaced, a log rotated), or the job wrote more than
    # one read counts.
    skipped: int = 0
    skipped_exact: bool = True

    @property
    def failed(self) -> bool:
        return bool(self.exit_code) or self.reason in FAILURE_REASONS

    @property
    def explanation(self) -> str:
        """What the reason means, in words ("" when it has none)."""
        return FAILURE_REASONS.get(self.reason, "")


@dataclass(frozen=True, slots=True)
class LogStream:
    """One replica's whole log, read as it is passed on (`Cluster.log_stream`).

    `replica` is its state, without lines. `chunks` gives the log's bytes as the kubelet serves them, oldest
    first, at most LOG_CHUNK_BYTES each, and may raise ClusterUnavailable when the cluster stops answering
    midway. It holds a connection open until it is exhausted or closed: a reader that stops early closes it.
    """

    replica: ReplicaLog
    chunks: Generator[bytes, None, None]


def no_bytes() -> Generator[bytes, None, None]:
    """The chunks of a log that has none (a container that never started)."""
    yield from ()


def failing_replica(replicas: list[ReplicaLog]) -> ReplicaLog | None:
    """The replica that failed first (the earliest to stop among the failed), or None when none failed.

    When one replica fails, the others are often stopped after it with an error of their own;
    the first to stop is the one a person wants to read.
    """
    failed = [replica for replica in replicas if replica.failed]
    if not failed:
        return None
    return min(failed, key=lambda replica: (replica.finished_at is None, replica.finished_at or datetime.min))


@dataclass(frozen=True, slots=True)
class TenantTeam:
    slug: str
    nominal: dict[str, int]
    borrowing_limit: dict[str, int]  # missing = no limit
    per_replica_max: dict[str, int] = field(default_factory=dict)
    default_request: dict[str, int] = field(default_factory=dict)
    weight: float = 1.0
    # On a cluster with GPU types: nominal GPUs per type its quota names (`nominal` counts their sum).
    type_nominal: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TenantTier:
    name: str
    value: int
    preemptible: bool


@dataclass(frozen=True, slots=True)
class Tenants:
    teams: tuple[TenantTeam, ...]
    tiers: tuple[TenantTier, ...]
    # The cluster's GPU types, cheapest first (empty: its GPUs are of one kind): doctor checks the nodes' labels.
    gpu_types: tuple[TypeLabel, ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A PersistentVolumeClaim of a team's namespace, as `doctor` lists it."""

    namespace: str
    name: str
    capacity: int = 0  # bytes; 0 while unbound
    access_modes: tuple[str, ...] = ()
    phase: str = ""  # Pending | Bound | Lost


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem `doctor` found, with what to do about it.

    `blocking` is False for what leaves Gangway working but narrower (a job kind
    whose operator is not installed while another kind's is): doctor names it
    and still passes.
    """

    problem: str
    fix: str
    blocking: bool = True


class Cluster(Protocol):
    """What the loop needs from a cluster. Every method may raise ClusterUnavailable."""

    def nodes(self) -> list[NodeInfo]:
        """Every node by name, those that take no new pods (cordoned, or tainted against Gangway's pods)
        marked with why (`NodeInfo.unschedulable`)."""

    def outside_usage(self) -> list[OutsidePod]:
        """Running pods Gangway did not create (none labelled with a job id: `job_statuses` reads those)."""

    def create_job(self, job: ClusterJob) -> None:
        """Create the job, or resume it if it exists suspended. Idempotent.

        Raises ClusterError, creating nothing, when a claim the job mounts is not in its namespace.
        """

    def check_create(self, job: ClusterJob) -> None:
        """Raise what `create_job` would raise for the job now (ClusterError, ClusterUnavailable), creating and
        changing nothing: the loop asks before it preempts anyone for the job. The Kubernetes adapter asks the
        API server for a dry run, so admission webhooks and the namespace's quota answer too."""

    def suspend_job(self, job: ClusterJob) -> None:
        """Stop the job's pods (after their grace period), keeping the job. Idempotent."""

    def check_suspend(self, job: ClusterJob) -> None:
        """Raise what `suspend_job` would raise for the job now (ClusterError, ClusterUnavailable), changing
        nothing: the loop asks before it preempts an adopted job, which Gangway can only suspend (never delete).
        The Kubernetes adapter asks the API server for a dry run, so admission webhooks answer too."""

    def delete_job(self, namespace: str, name: str, kind: str) -> None:
        """Delete the one job of that kind (a `jobs.kinds` name) and name, and its pods; an object of another
        kind with the same name is left alone. Deleting a missing job is success. Never called for an adopted
        job. Callers name the kind of the object they found (`JobStatus.kind`) or made (`ClusterJob.kind`)."""

    def outside_jobs(self) -> OutsideJobs:
        """Every job of the adopted kinds Gangway did not create that carries `gangway.io/queue`, adopted
        or not, and the kinds whose list the cluster answered. Reads no Katib Trial."""

    def outside_job_here(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        """Whether the cluster has the outside job of that kind and name in the queue (labelled
        `gangway.io/queue`), the object of that uid (another made under its name since is not it). Read on
        its own, for a job the lists of a pass did not show."""

    def mark_outside(self, job: OutsideJob, *, job_id: int | None = None, rejected: str = "",
                     cancelled: str = "", released: str = "") -> bool:
        """Label an outside job with the Gangway job that adopted it, or write back why it was refused
        (annotation, Warning event and, for a kind whose operator keeps it, a Failed condition in its status,
        reason GangwayRejected), or that a person cancelled it in Gangway (`cancelled`: only that Failed
        condition, reason GangwayCancelled; `JobKind.keeps_written_failure`), or that Gangway no longer counts
        it, its owner having suspended it while it ran (`released`: a Normal event, reason GangwayReleased, the
        object itself untouched). Returns whether this call wrote the Failed condition.

        Idempotent; a job deleted or finished meanwhile is success.
        """

    def trials(self, namespace: str) -> list[TrialResult]:
        """Every Katib trial of one namespace (a team's) with its objective; empty when Katib is not installed.
        Never a list of the whole cluster: other tenants' trials are not Gangway's to read."""

    def experiments(self, namespace: str) -> list[ExperimentResult]:
        """The Katib Experiments of one namespace (a team's) that have ended, each with its best trial; empty
        when Katib is not installed or none has ended. Never a list of the whole cluster."""

    def job_statuses(self, *, with_outside: bool = False) -> JobStatuses:
        """Every Gangway job the cluster has, with its phase, and the labelled pods of no job it has (`strays`);
        with `with_outside`, the jobs from elsewhere too (`JobStatuses.outside`), each object read once."""

    def sync_tenants(self, tenants: Tenants) -> list[str]:
        """Make namespaces, quotas, priority classes and queues match; returns what changed."""

    def doctor(self, tenants: Tenants) -> list[Finding]:
        """What is wrong with the cluster for Gangway; empty when all is well."""

    def claims(self, namespace: str) -> list[ClaimInfo]:
        """The PersistentVolumeClaims of a namespace, by name; empty when it has none or does not exist."""

    def logs(self, namespace: str, job_id: int, *, name: str = "", replica: str = "",
             tail: int | None = LOG_TAIL, lines_of: str | None = None, timed: bool = False,
             after: dict[str, LogPosition] | None = None) -> list[ReplicaLog]:
        """Each replica of the job (only `replica` when named), in replica order, with its last `tail` log lines.

        `timed` reads each line's time too (`times`, and `position`, after the last line). With `after`
        (replica name: position; a replica not named reads from its start), a replica's lines are those
        written after its position, the newest `tail` of them, with how many more were left out before
        them (`skipped`): a reader that reads on from each answer's positions gets each line once, however
        often its text repeats, and is told of those it missed. `after` implies `timed`.

        `tail=None` reads the whole log, up to LOG_LIMIT_BYTES. With `lines_of`, only that replica's
        lines are read (PICK: the failing replica's, else the first's), the others' states alone
        (`read` False), so a page of a 64-replica job costs one log read, not 64. Empty when the job
        has no pods (not created yet, or gone); a replica whose container has not started has no
        lines; one waiting to restart after it stopped has its previous container's (`previous`). With
        `name` (the job's own object), pods another job object controls are left out: a copy of the
        object renamed in the same namespace keeps the job's id label, and its pods are not the job's.
        """

    def log_stream(self, namespace: str, job_id: int, *, replica: str, name: str = "") -> LogStream | None:
        """The whole log of the job's replica `replica`, however long, to be read in chunks (a download).

        None when the job has no pod of that replica. The pods are read and the log opened before this
        returns, so a cluster out of reach raises ClusterUnavailable before anything is passed on; a
        container that has not started has no bytes, one waiting to restart its previous container's
        (`previous`), as with `logs`. `name` leaves out the pods of another job object, as with `logs`.
        """


def check_claims(cluster: Cluster, job: ClusterJob) -> None:
    """Raises the ClusterError of `missing_claims_error` when `job` mounts a claim its namespace
    lacks; reads the claims only when it mounts one. The adapters check before a create, and
    the loop before it preempts anyone for the job."""
    if any(volume.source == "claim" for volume in job.volumes):
        error = missing_claims_error(job, {claim.name for claim in cluster.claims(job.namespace)})
        if error is not None:
            raise error


INTERNAL_ERROR = 500


@contextmanager
def on_one_object(cluster: Cluster) -> Iterator[None]:
    """Around calls on one object: a ClusterUnavailable raised inside for a 500 the server kept
    answering, or for a request it took and did not answer in time (`NoAnswer`), becomes that
    object's ClusterError when the cluster still answers a read, since a webhook failing or slow
    for one namespace fails there only ("Internal error occurred: failed calling webhook", "context
    deadline exceeded"). The loop and reconcile then go on with the other jobs; that one waits
    (a ServerFailing: retried with a backoff, never counted as a refusal that fails the job).
    Anything else (no connection, 502-504, 429), or a read the cluster does not answer either,
    stays an outage, which stops them."""
    try:
        yield
    except ClusterUnavailable as error:
        if error.status != INTERNAL_ERROR and not isinstance(error, NoAnswer):
            raise
        try:
            cluster.nodes()
        except ClusterUnavailable:
            raise error from None
        except ClusterError:
            pass  # refused, but it answered
        raise ServerFailing(str(error), unanswered=isinstance(error, NoAnswer)) from error


def missing_claims_error(job: ClusterJob, present: set[str]) -> ClusterError | None:
    """The error for claims `job` mounts that its namespace lacks (`present` names those it has), or None."""
    missing = sorted({v.name for v in job.volumes if v.source == "claim"} - present)
    if not missing:
        return None
    names = ", ".join(missing)
    has = ", ".join(sorted(present)) or "none"
    return ClusterError(
        f"Job {job.name} mounts PersistentVolumeClaim {names}, which namespace {job.namespace} does not have "
        f"(its claims: {has}); create the claim there or remove the volume from the job."
    )


def cluster_name(job_id: int, name: str) -> str:
    """The deterministic object name of a job: `<name>-g<id>`, at most 63 characters.

    A retried create uses the same name, so it can never make a second job.
    """
    suffix = f"-g{job_id}"
    return name[: 63 - len(suffix)].rstrip("-") + suffix
