"""A busy cluster's jobs from elsewhere, for the tests and the bench that count what adoption costs the API
server: Katib trials and their Trials, a Pipelines run's jobs, jobs adopted and running; and a tally of the
requests a pass sends (`Tally`).

The fake API server runs no operator and no kubelet: `run` does what they would for an admitted job
(its pods bound where it was placed and running, its Running condition).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from jobs.models import Job
from scheduling.reconcile import reconcile
from tests.cluster.fake_apiserver import FakeApiServer, _PATH, kind_path
from tests.cluster.test_outside_jobs import outside_job

KATIB_EXPERIMENT = "katib.kubeflow.org/experiment"


def node(name: str, gpu: int = 8) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
            "status": {"allocatable": {"cpu": "256", "memory": "2048Gi", "pods": "250", "nvidia.com/gpu": str(gpu)}}}  # fmt: skip


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def trial(name: str, experiment: str, team: str, *, outcome: str = "", value: float | None = None) -> dict:
    """A Katib Trial as its controller keeps it: the experiment's label, the objective, and once it
    completed its condition and, with `value`, its observation."""
    status: dict = {"conditions": [{"type": outcome, "status": "True"}] if outcome else []}
    if value is not None:
        status["observation"] = {"metrics": [{"name": "accuracy", "latest": str(value), "max": str(value),
                                              "min": str(value)}]}  # fmt: skip
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial",
            "metadata": {"name": name, "namespace": team, "labels": {KATIB_EXPERIMENT: experiment}},
            "spec": {"objective": {"type": "maximize", "objectiveMetricName": "accuracy"}},
            "status": status}  # fmt: skip


def trial_job(name: str, team: str, *, gpu: int = 1, suspend: bool = True) -> dict:
    """A trial's PyTorchJob as Katib's trial controller creates it: owned by its Trial, no Katib label."""
    owner = [{"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "name": name, "controller": True}]
    return outside_job("PyTorchJob", name=name, namespace=team, gpu=gpu, replicas=1, suspend=suspend,
                       ownerReferences=owner)  # fmt: skip


def pipeline_job(name: str, team: str, run: str, *, gpu: int = 1) -> dict:
    return outside_job("PyTorchJob", name=name, namespace=team, gpu=gpu, replicas=1,
                       labels={"pipeline/runid": run}, annotations={"pipelines.kubeflow.org/run_name": run})  # fmt: skip


def run(fake: FakeApiServer, job: Job) -> None:
    """What the operator and the kubelet do for an admitted job: a running pod per replica on its placement,
    owned by its object and labelled as its template says, and the object's Running condition."""
    prefix, plural = kind_path(job.kind)
    key = (prefix, plural, job.team.slug, job.cluster_name or job.name)
    obj = fake.objects[key]
    for index, where in enumerate(job.placement or ["n0"]):
        fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{obj['metadata']['name']}-worker-{index}", "namespace": job.team.slug,
            "labels": {"gangway.io/job-id": str(job.pk)},
            "ownerReferences": [{"apiVersion": obj["apiVersion"], "kind": job.kind, "name": obj["metadata"]["name"],
                                 "uid": obj["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": where,
                     "containers": [{"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
            "status": {"phase": "Running"}})  # fmt: skip
    fake.add({**obj, "status": {"conditions": [{"type": "Running", "status": "True"}]}})


def run_admitted(fake: FakeApiServer, cluster) -> None:
    """What the operator and the kubelet do for every admitted job of one replica group: a running pod per
    replica on its placement, asking for the group's GPUs, and the object's Running condition; then reconcile
    sees them run."""
    for job in Job.objects.filter(state=Job.State.ADMITTED).select_related("team"):
        name = f"{job.name}-g{job.pk}"
        obj = fake.get("TFJob", name, job.team.slug)
        for index, where in enumerate(job.placement):
            fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{name}-worker-{index}", "namespace": job.team.slug,
                "labels": {"gangway.io/job-id": str(job.pk)},
                "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": name,
                                     "uid": obj["metadata"]["uid"], "controller": True}]},
                "spec": {"nodeName": where, "containers": [{"name": "tensorflow", "resources": {
                    "limits": {"nvidia.com/gpu": str(job.replicas[0]["gpu"])}}}]},
                "status": {"phase": "Running"}})  # fmt: skip
        fake.add({**obj, "status": {"conditions": [{"type": "Running", "status": "True"}]}})
    reconcile(cluster=cluster)


def finish(fake: FakeApiServer, job: Job) -> None:
    """Katib removes a completed trial's job and its pods (the Trial stays)."""
    prefix, plural = kind_path(job.kind)
    name = job.cluster_name or job.name
    fake.objects.pop((prefix, plural, job.team.slug, name), None)
    for key in [key for key in fake.objects if key[1] == "pods" and key[2] == job.team.slug
                and key[3].startswith(f"{name}-worker-")]:  # fmt: skip
        fake.objects.pop(key)


@dataclass
class Tally:
    """The requests the fake answered since `start`, by verb and resource, and the objects they carried."""

    requests: Counter = field(default_factory=Counter)
    objects: int = 0

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def of(self, verb: str, resource: str = "") -> int:
        return sum(count for (v, r), count in self.requests.items() if v == verb and resource in ("", r))

    def line(self) -> str:
        return ", ".join(f"{verb} {resource} {count}" for (verb, resource), count in sorted(self.requests.items()))


class Counting:
    """Marks where a pass starts in the fake's record; `tally()` counts what came since."""

    def __init__(self, fake: FakeApiServer):
        self.fake = fake
        self.requests, self.listed = len(fake.requests), len(fake.listed)

    def tally(self) -> Tally:
        result = Tally()
        for method, path, query in self.fake.requests[self.requests:]:
            match = _PATH.match(path)
            plural = match.group("plural") if match else path
            if match and match.group("sub"):
                plural = f"{plural}/{match.group('sub')}"
            if method == "GET" and "watch" in query:
                verb = "watch"
            elif method == "GET":
                verb = "list" if match and match.group("name") is None else "get"
            else:
                verb = method.lower()
            if "dryRun" in query:
                verb = f"{verb} (dry run)"
            result.requests[(verb, plural)] += 1
            if verb not in ("list",):
                result.objects += 1
        result.objects += sum(len(items) for _, items in self.fake.listed[self.listed:])
        return result
