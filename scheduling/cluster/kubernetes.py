"""The Kubernetes adapter of the Cluster port: the official client against a real cluster.

Jobs are of the kinds `jobs.kinds` registers, built by
`job_manifests.job_manifest`; the label `gangway.io/job-id` joins each one, and
every pod it owns, to its Gangway job. Every call goes through
`kubernetes_api.Api.call`, which turns HTTP answers into success,
`ClusterError` or `ClusterUnavailable`.
"""

from __future__ import annotations

import os
from collections import defaultdict

from kubernetes import config
from kubernetes.client import ApiClient, Configuration

from jobs import kinds
from scheduling.cluster import job_manifests, kubernetes_logs, kubernetes_outside, kubernetes_tenants, manifests, outside
from scheduling.cluster.base import (
    LOG_TAIL,
    ClaimInfo,
    ClusterError,
    ClusterJob,
    ClusterUnavailable,
    ExperimentResult,
    Finding,
    JobStatus,
    JobStatuses,
    LogPosition,
    LogStream,
    NodeInfo,
    OutsideJob,
    OutsideJobs,
    OutsidePod,
    Phase,
    RUNS,
    ReplicaLog,
    Tenants,
    TrialResult,
    check_claims,
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
from scheduling.cluster.kubernetes_pods import controller, failure_sentence, waiting_pods
from scheduling.cluster.manifests import JOB_ID_LABEL

# Taints that keep pods off a node, unless the pod tolerates them.
BLOCKING_TAINTS = {"NoSchedule", "NoExecute"}
# The pods that hold room on a node, as a field selector (the server filters on these fields for pods):
# bound to one and not ended.
HOLDING_ROOM = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"



class KubernetesCluster:
    """The Cluster port over the Kubernetes API (see `scheduling.cluster.base.Cluster`)."""

    def __init__(self, api_client: ApiClient, *, retry_budget: float = 3.0):
        self.api = Api(api_client, retry_budget=retry_budget)
        self.logs_deadline = kubernetes_logs.LOGS_DEADLINE

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
        """Returns every node by name, with allocatable GPUs, cpu millicores and memory bytes.

        Cordoned nodes and nodes with a NoSchedule or NoExecute taint that
        Gangway's pods do not tolerate (see `manifests.TOLERATIONS`) take no
        new pods: they are marked with why (`unschedulable`), never left out,
        so a job only they could hold waits for them instead of being rejected (R10).
        """
        result = []
        for node in self._nodes():
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            result.append(NodeInfo(
                name=node["metadata"]["name"],
                gpu=amount("gpu", allocatable.get(manifests.RESOURCE_NAMES["gpu"])),
                cpu=amount("cpu", allocatable.get("cpu")),
                memory=amount("memory", allocatable.get("memory")),
                labels=tuple(sorted((node["metadata"].get("labels") or {}).items())),
                unschedulable=unschedulable(node.get("spec") or {}),
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
        # `one_object`: a 404 naming no object is the kind not served for a moment, retried, then an outage;
        # never the cluster's word on the job (a missing namespace's 404 names it, and is a refusal). Unless
        # the kind is not installed at all: that is the cluster's word, and the other jobs go on.
        try:
            created = self.api.call(
                verb, job.kind, what, self.api.custom.create_namespaced_custom_object,
                *args, desired, tolerate=(CONFLICT,), one_object=True, **mode,
            )
        except ClusterUnavailable as error:
            if error.status != NOT_FOUND or self._installed(kind):
                raise
            raise ClusterError(
                f"{verb} {job.kind} {what}: the cluster has no {job.kind} (its CustomResourceDefinition "
                f"{kind.plural}.{kind.group} is not installed); install its operator, or submit the job as another "
                "kind") from error  # fmt: skip
        if created is not None:
            return
        existing = self.api.call(
            "read", job.kind, what, self.api.custom.get_namespaced_custom_object, *args, job.name, one_object=True,
        )
        labels = (existing.get("metadata") or {}).get("labels") or {}
        if labels.get(JOB_ID_LABEL) != str(job.job_id):
            # Someone else's object under the job's name (a person's copy, or a webhook that dropped the label):
            # taken for the job's, it would hold the job's admission while nothing of the job runs.
            raise ClusterError(
                f"{verb} {job.kind} {what}: a {job.kind} of that name exists already, not Gangway's for job "
                f"{job.job_id} (its {JOB_ID_LABEL} label is {labels.get(JOB_ID_LABEL, 'missing')}); delete or "
                f"rename it, and the job is created when admitted again")  # fmt: skip
        if not job_manifests.is_suspended(kind, existing):
            return
        self.api.call(
            "try to resume" if dry_run else "resume", job.kind, what, self.api.custom.patch_namespaced_custom_object,
            *args, job.name, job_manifests.resume_patch(job), one_object=True, **mode,
        )

    def suspend_job(self, job: ClusterJob) -> None:
        """Sets the kind's suspend flag (`runPolicy.suspend`...); the operator stops the pods after their grace period.

        Returns nothing; a job that no longer exists is already stopped.
        """
        self._suspend(job, dry_run=False)

    def check_suspend(self, job: ClusterJob) -> None:
        """Asks the API server to try `suspend_job` as a dry run (`dryRun=All`): admission webhooks answer as
        they would, and nothing is stored. Returns nothing; raises what the suspend would. A webhook that
        cannot be dry-run (400 "does not support dry run") passes unchecked."""
        try:
            self._suspend(job, dry_run=True)
        except ClusterError as error:
            if not _dry_run_unsupported(error):
                raise

    def _suspend(self, job: ClusterJob, *, dry_run: bool) -> None:
        kind = kinds.get(job.kind)
        self.api.call(
            "try to suspend" if dry_run else "suspend", job.kind, f"{job.namespace}/{job.name}",
            self.api.custom.patch_namespaced_custom_object,
            kind.group, kind.version, job.namespace, kind.plural, job.name,
            job_manifests.suspend_patch(kind), tolerate=(NOT_FOUND,), one_object=True,
            **({"dry_run": "All"} if dry_run else {}),
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

    def job_statuses(self, *, with_outside: bool = False) -> JobStatuses:
        """Returns every job labelled with a Gangway job id, its phase, its running pods and, while it is
        neither suspended nor ended, its replicas waiting to start (`kubernetes_pods.waiting_pods`), and the
        labelled pods bound to a node that belong to none of those jobs (`JobStatuses.strays`); with
        `with_outside`, the jobs from elsewhere (`JobStatuses.outside`): the adopted ones read from the same
        lists, since they carry the job-id label, and only those not adopted yet listed on their own.

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
        labelled: dict[str, list[dict] | None] = {}  # each kind's objects, for `outside`
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
            labelled[kind.name] = jobs
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
                    waiting_pods=waiting_pods(kind, obj, _of_job(owned, key)) if phase in RUNS else (),
                ))
        strays = [pod for key, of_key in bound.items() if key not in claimed for pod in of_key]
        return JobStatuses(sorted(result, key=lambda status: status.job_id),
                           sorted(strays, key=lambda pod: (pod.namespace, pod.name)),
                           kubernetes_outside.outside_jobs(self.api, labelled=labelled) if with_outside else None)  # fmt: skip

    def _installed(self, kind: kinds.JobKind) -> bool:
        """Whether the cluster has the kind's CustomResourceDefinition (one small list by name)."""
        return definition_installed(self.api, f"{kind.plural}.{kind.group}")

    def logs(self, namespace: str, job_id: int, *, name: str = "", replica: str = "",
             tail: int | None = LOG_TAIL, lines_of: str | None = None, timed: bool = False,
             after: dict[str, LogPosition] | None = None) -> list[ReplicaLog]:
        """Returns each replica pod of the job with its log lines and how it stopped (`kubernetes_logs`),
        the whole read within `logs_deadline` seconds."""
        return kubernetes_logs.read_logs(self.api, namespace, job_id, seconds=self.logs_deadline, name=name,
                                         replica=replica, tail=tail, lines_of=lines_of, timed=timed, after=after)

    def log_stream(self, namespace: str, job_id: int, *, replica: str, name: str = "") -> LogStream | None:
        """The replica's whole log, to be read in chunks (`kubernetes_logs.open_log`), opened within
        `logs_deadline` seconds."""
        return kubernetes_logs.open_log(self.api, namespace, job_id, replica=replica, name=name,
                                        seconds=self.logs_deadline)  # fmt: skip


    def outside_jobs(self) -> OutsideJobs:
        """Returns every TFJob, PyTorchJob or TrainJob labelled `gangway.io/queue` that Gangway did not create,
        and the kinds whose list the cluster answered."""
        return kubernetes_outside.outside_jobs(self.api)

    def outside_job_here(self, kind: str, namespace: str, name: str, uid: str) -> bool:
        """Whether the cluster has the outside job of that kind and name in the queue, of that uid: read on its
        own."""
        return kubernetes_outside.here(self.api, kind, namespace, name, uid)

    def mark_outside(self, job: OutsideJob, *, job_id: int | None = None, rejected: str = "",
                     cancelled: str = "", released: str = "") -> bool:
        """Labels an outside job with its Gangway job, or writes back that it was refused, cancelled or released.
        Returns whether it marked the job Failed."""
        return kubernetes_outside.mark(self.api, job, job_id=job_id, rejected=rejected, cancelled=cancelled,
                                       released=released)  # fmt: skip

    def trials(self, namespace: str) -> list[TrialResult]:
        """Returns the Katib trials of one namespace with their objective; empty when Katib is not installed."""
        return kubernetes_outside.trials(self.api, namespace)

    def experiments(self, namespace: str) -> list[ExperimentResult]:
        """Returns the Katib Experiments of one namespace that have ended, with their best trial."""
        return kubernetes_outside.experiments(self.api, namespace)

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
        schedulable = [node for node in self.nodes() if node.schedulable]
        findings = kubernetes_tenants.doctor(self.api, tenants, self._nodes(), schedulable)
        return findings + kubernetes_outside.doctor(self.api, tenants)



def unschedulable(spec: dict) -> str:
    """Returns why a node with this spec takes no new Gangway pod: "cordoned", "tainted <key>" (the first
    NoSchedule or NoExecute taint they do not tolerate), or "" when it takes them. A cordoned node also
    carries the taint node.kubernetes.io/unschedulable; "cordoned" says it in the words of `kubectl cordon`."""
    if spec.get("unschedulable"):
        return "cordoned"
    for taint in spec.get("taints") or ():
        if taint.get("effect") in BLOCKING_TAINTS and not tolerated(taint):
            return f"tainted {taint.get('key')}"
    return ""


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
    return controller(pod).get("uid", "")



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
