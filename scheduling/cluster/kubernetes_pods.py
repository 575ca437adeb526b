"""A job's replica pods as the Kubernetes adapter reads them: which replica a pod is, its training
container, how it stopped or why it waits to start, and the job object that controls it. Read by the
adapter's job statuses (`kubernetes.py`) and its log reads (`kubernetes_logs.py`)."""

from __future__ import annotations

from datetime import datetime

from jobs import kinds
from scheduling.cluster import job_manifests
from scheduling.cluster.base import ReplicaLog, WaitingPod, failing_replica


def controller_name(pod: dict) -> str:
    """The name of the job object that controls the pod; "" when none does."""
    return controller(pod).get("name", "")


def controller(pod: dict) -> dict:
    """The pod's ownerReference to the job object that controls it (one of a job kind); {} when none does."""
    job_kinds = kinds.names()
    return next((ref for ref in pod["metadata"].get("ownerReferences") or ()
                 if ref.get("controller") and ref.get("kind") in job_kinds), {})  # fmt: skip


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


def waiting_pods(kind: kinds.JobKind, obj: dict, pods: list[dict]) -> tuple[WaitingPod, ...]:
    """The replicas of job object `obj` whose pods wait to start, read from its pods (`pods`, every phase): each
    pod Pending, bound to a node or not, with why (`pending_why`); then one for each replica the object asks
    for beyond the pods it has, its pod not made yet (the operator makes a lost pod again only once the old one
    is gone, and a namespace's quota may refuse it), named by the replicas no pod is labelled as.

    A pod that ended counts as made: a replica that completed (Succeeded) does not wait, nor does one that
    failed, which the operator restarts (its new pod is Pending) or fails the job for. Pods are counted, not
    matched by their labels, so a kind with more pods than replicas (a TrainJob's Jobs keep a failed pod
    beside its next) or labels the registry does not know only ever counts fewer missing. An object whose
    replicas cannot be read counts none missing. The caller asks only for an object neither suspended nor ended.

    Only the replicas it needs to train are said to wait (`_needed_to_train`): an elastic PyTorchJob trains on
    with fewer Workers than it asks for.
    """
    pending = sorted((pod for pod in pods if (pod.get("status") or {}).get("phase") == "Pending"), key=replica_order)
    waiting = [WaitingPod(replica=replica_name(pod), why=pending_why(pod)) for pod in pending]
    try:
        asked = job_manifests.replica_needs({**obj, "kind": kind.name})
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return tuple(waiting)  # not a shape its layout reads: nothing is known missing
    expected = [f"{role.lower()}-{index}" for role, count, _ in asked for index in range(count)]
    missing = len(expected) - len(pods)
    if missing > 0:
        # Named only when every pod says which replica it is: otherwise a name could be a running one's.
        named = all(_replica_labels(pod)[0] for pod in pods)
        made = {replica_name(pod) for pod in pods}
        unmade = [name for name in expected if name not in made] if named else []
        waiting += [WaitingPod(replica=name, why="its pod has not been created")
                    for name in (unmade + ["a replica"] * missing)[:missing]]  # fmt: skip
    return _needed_to_train(kind, obj, asked, tuple(waiting))


def _needed_to_train(kind: kinds.JobKind, obj: dict, asked: list[tuple[str, int, dict]],
                     waiting: tuple[WaitingPod, ...]) -> tuple[WaitingPod, ...]:  # fmt: skip
    """The replicas among `waiting` that job object `obj` (asking for `asked`) needs to train: every one, but for
    an elastic job (`elastic_least`) whose replicas of its elastic role that do not wait are at least the fewest
    it trains with. Those of that role then wait as the job is meant to run, short of them, and are left out;
    its other roles (a PyTorchJob's Master) never are. While a replica no pod names ("a replica") waits, it could
    be of any role, and every one is kept."""
    least = elastic_least(kind, obj)
    if least is None or not waiting:
        return waiting
    roles = {role.lower() for role, _, _ in asked}
    if any(pod.replica.rsplit("-", 1)[0] not in roles for pod in waiting):
        return waiting
    role = kind.elastic_role.lower()
    asked_of_role = sum(count for name, count, _ in asked if name.lower() == role)
    of_role = [pod for pod in waiting if pod.replica.rsplit("-", 1)[0] == role]
    if asked_of_role - len(of_role) < least:
        return waiting
    return tuple(pod for pod in waiting if pod not in of_role)


def elastic_least(kind: kinds.JobKind, obj: dict) -> int | None:
    """The fewest replicas of its kind's elastic role (`JobKind.elastic_role`) job object `obj` trains with: its
    elastic policy's minReplicas, else its maxReplicas, as the Training Operator defaults one from the other;
    None for an object of a kind never elastic, with no such policy, or whose policy names neither as a whole
    number (then it needs every replica it asks for)."""
    if not kind.elastic_policy:
        return None
    policy: object = obj
    for key in kind.elastic_policy:
        policy = policy.get(key) if isinstance(policy, dict) else None
    if not isinstance(policy, dict):
        return None
    least = policy.get("minReplicas")
    if least is None:
        least = policy.get("maxReplicas")
    return least if isinstance(least, int) and not isinstance(least, bool) and least >= 1 else None


def pending_why(pod: dict) -> str:
    """Why a pending pod has not started, in the cluster's words: its container's when it cannot start (an image
    that cannot be pulled, explained), else the scheduler's ("0/4 nodes are available: 4 Insufficient
    nvidia.com/gpu."), else its container's waiting reason (ContainerCreating: a volume that does not attach
    shows here), else where it stands: bound to a node, or not scheduled yet."""
    replica = replica_log(pod, ())
    if replica.explanation:
        return f"{replica.reason}: {replica.explanation}"
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            said = (condition.get("message") or condition.get("reason") or "").strip().rstrip(".")
            if said:
                return f"not scheduled: {said}"
    if replica.reason:
        return f"{replica.reason}: {replica.message}" if replica.message else replica.reason
    node = (pod.get("spec") or {}).get("nodeName")
    return f"bound to node {node}, not started yet" if node else "not scheduled to a node yet"


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
