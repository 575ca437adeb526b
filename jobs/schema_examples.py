"""Examples shown in the OpenAPI schema (Swagger UI, Redoc) for the jobs endpoints."""

from drf_spectacular.utils import OpenApiExample

from jobs.codes import Because
from scheduling.policy import Code

SPEC = {
    "team": "maps", "name": "resnet50-baseline", "kind": "TFJob", "image": "tensorflow/tensorflow:2.12.0-gpu",
    "command": ["python", "/app/train.py"], "args": ["--epochs", "90"], "env": {"DATASET": "imagenet"},
    "tier": "standard", "max_runtime": 7200,
    "replicas": [{"role": "Worker", "count": 4, "gpu": 1, "cpu": "2", "memory": "4Gi"}],
}  # fmt: skip

JOB_BODY = {
    "id": 42, "url": "https://gangway.example.com/api/v1/jobs/42/", "web_url": "https://gangway.example.com/jobs/42/",
    "team": "maps", "name": "resnet50-baseline", "kind": "TFJob", "state": "queued",
    "reason": "Waiting for quota: needs 4 GPUs; 2 free in team maps, 0 borrowable from idle teams.",
    "reason_code": str(Code.NOTHING_TO_BORROW), "position": 3, "team_position": 1, "eta": "2025-05-01T12:40:00Z", "tier": "standard",
    "owner": None, "submitted_via": "API token ci-main", "image": "tensorflow/tensorflow:2.12.0-gpu",
    "command": ["python", "/app/train.py"], "args": ["--epochs", "90"], "env": {"DATASET": "imagenet"},
    "replicas": [{"role": "Worker", "count": 4, "gpu": 1, "cpu": "2", "memory": "4Gi"}], "gpu_total": 4,
    "gpu_type": ["h100", "a100"], "assigned_gpu_type": "", "max_runtime": 7200, "idempotency_key": "pipeline-1234", "placement": [], "preemption_count": 0, "attempt": 1,
    "submitted_at": "2025-05-01T12:00:00Z", "queued_at": "2025-05-01T12:00:00Z", "admitted_at": None,
    "started_at": None, "finished_at": None, "updated_at": "2025-05-01T12:00:05Z",
}  # fmt: skip

JOB = OpenApiExample("A waiting job", value=JOB_BODY, response_only=True)
SUBMIT_SPEC = OpenApiExample("Gangway's job spec", value=SPEC, request_only=True)
SUBMIT_TYPED = OpenApiExample("A job that prefers h100 and accepts a100", value={**SPEC, "gpu_type": ["h100", "a100"]},
                              request_only=True)  # fmt: skip
SUBMIT_MANIFEST = OpenApiExample(
    "A PyTorchJob manifest",
    request_only=True,
    value={
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert-finetune", "namespace": "maps"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [{
                "name": "pytorch", "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                "command": ["python", "finetune.py"], "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}},
            "Worker": {"replicas": 3, "template": {"spec": {"containers": [{
                "name": "pytorch", "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                "command": ["python", "finetune.py"], "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}},
        }},
    },
)  # fmt: skip
SUBMITTED = OpenApiExample(
    "Submitted", value={**JOB_BODY, "position": None, "team_position": None, "eta": None, "reason_code": str(Because.NEW),
                        "reason": "Waiting for the next admission cycle.", "unsupported": []},
    response_only=True, status_codes=["201", "200"],
)  # fmt: skip
SPEC_ERRORS = OpenApiExample(
    "Invalid spec",
    value={"replicas[0].gpu": ["Must be a whole number of GPUs from 0 to 64, got -1."],
           "image": ["Required: a container image such as tensorflow/tensorflow:2.12.0-gpu."]},
    response_only=True, status_codes=["400"],
)  # fmt: skip
NEVER_FITS = OpenApiExample(
    "Can never fit",
    value={"detail": "Can never run: Requested 24 GPUs; team maps may use at most 16 (8 nominal + 8 borrowable).",
           "code": "R10_quota"},
    response_only=True, status_codes=["400"],
)  # fmt: skip
CONFLICT = OpenApiExample(
    "Key reused",
    value={"detail": "Idempotency key 'pipeline-1234' was already used for job resnet50-baseline (#42) with a "
           "different spec; use a new key for a new job.", "job": 42},
    response_only=True, status_codes=["409"],
)  # fmt: skip
QUEUE_FULL = OpenApiExample(
    "Team queue full",
    value={"detail": "Team maps already has 1,000 jobs queued, the most a team may queue (MAX_QUEUED_PER_TEAM); "
           "wait for some to start or cancel some.", "code": "queue_full"},
    response_only=True, status_codes=["409"],
)  # fmt: skip
EVENTS = OpenApiExample(
    "An event",
    response_only=True,
    value={"id": 7, "at": "2025-05-01T12:03:10Z", "kind": "admitted", "from_state": "queued", "to_state": "admitted",
           "message": "Admitted on node-01.", "code": "", "actor": None},
)  # fmt: skip
