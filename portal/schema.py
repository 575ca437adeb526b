"""The OpenAPI schema's error answers: every operation documents the 4xx it can give, in DRF's shapes.

A postprocessing hook, so each view documents only what is particular to it
(a 409 on a reused idempotency key, a 400 for a job that can never fit) and the
answers every view shares are written once.
"""

from __future__ import annotations

from django.conf import settings

ERROR = {
    "type": "object",
    "description": 'DRF\'s shapes: {"detail": "sentence"}, or a field dict {"field": ["sentence", ...]}.',
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
SHARED = {
    "400": "Invalid input: a field dict naming each problem, or a detail sentence (a body that cannot be parsed, "
    "nested too deep, or a URL holding NUL).",
    "401": "No credentials, or a token that is unknown or revoked.",
    "403": "Not allowed for this caller (a team token outside its team, a member where a lead or admin is needed).",
    "404": "Nothing there among what the caller may see (or a page past the last).",
    "413": "The request body is larger than {body_limit} KiB; a job spec is a few KiB.",
    "415": "A Content-Type the operation does not parse: JSON (and YAML on a job's submission).",
    "429": "Over the caller's request budget; retry after Retry-After seconds.",
}


def document_error_answers(result, generator, request, public):
    """Adds to each operation the shared 4xx answers it does not document itself; returns the schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for status, description in SHARED.items():
                if status not in responses and _applies(status, path, operation):
                    responses[status] = {
                        "description": description.format(body_limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024),
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    }
    return result


def _applies(status: str, path: str, operation: dict) -> bool:
    has_input = "{" in path or operation.get("parameters") or "requestBody" in operation
    if status == "400":
        return bool(has_input)
    if status in ("413", "415"):  # answered by DRF's parsers, which only a request body reaches
        return "requestBody" in operation
    if status == "404":
        names = {parameter.get("name") for parameter in operation.get("parameters", [])}
        return "{" in path or "page" in names
    return True


# The job spec's objects, whose unknown fields the submission service refuses by name (jobs/spec.py,
# jobs/volumes.py): the schema says so, or a client (and a schema-driven fuzzer) would take extra
# fields for allowed.
CLOSED = ("JobSpecRequest", "ReplicaInputRequest", "VolumeInputRequest", "NodeResourcesRequest", "SimulateRequest")


def close_job_spec_objects(result, generator, request, public):
    """Marks the job spec's objects as taking no fields beyond those listed; returns the schema."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in CLOSED:
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    return result

