"""The live OpenAPI schema, fuzzed with Schemathesis through the WSGI app, as four callers: a team token, a
member, a lead and an admin (user tokens). No 5xx; every answer's status is documented and its body matches
the schema; a request the schema calls valid is accepted (or refused for who asks: 401, 403, 404, 409).

The schema is fetched from /api/schema/ at collection. A bounded number of examples per operation and
caller keeps the run to about half a minute. Under CI=true the examples are the same at every run, so a
failure there is the change's and can be run again; elsewhere each run draws new ones, and what they find
is fixed where the schema or the API is wrong.
"""

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from tenants.tokens import token_create

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
CALLERS = ("team token", "member", "lead", "admin")
# Rules a JSON schema cannot state: names that must exist, one group per role, roles per kind, whether the
# job could ever fit. A 400 naming one of them is the right answer to a schema-valid request; any other is not.
BEYOND_THE_SCHEMA = (
    "may not use tier",  # a tier the job's team may use
    "does not exist",  # max_tier: a tier that exists
    "acts for team",  # a team token submits for its own team
    "but the spec names",  # ?team= and the spec's team agree
    "name the team in the spec",  # a person names the team in the spec or in ?team=
    "appears twice",  # one group per role
    "role is one of",  # each kind's own roles (PyTorchJob: Master and Worker; TrainJob: Node)
    "replica groups.",  # at most one group per role of the kind
    "runs on",  # a runtime for a TrainJob, none for the other kinds
    "not nodes",  # num_nodes only for a kind of identical nodes (TrainJob)
    "not both",  # num_nodes or replicas
    "Required: at least one replica group",  # replicas unless num_nodes
    "starts with a letter",  # a TrainJob's name (RFC 1035)
    "has exactly one",  # one Chief, Master or Evaluator
    "replicas in all",  # at most 1000 replicas over all groups
    "Can never run",  # R10: the cluster and the team's quota
    "Name exactly one of claim",  # a volume is a claim or a config map, not both
    "give each its own path",  # volumes at distinct paths
    "always mounted read-only",  # a config map is read-only
    "cannot be mounted over",  # /dev/shm and /checkpoint are Gangway's
    "without '.', '..'",  # a normalised path
    "is counted in it",  # shm needs a memory request or a team default
    "has no GPU types",  # gpu_type only on a cluster with GPU types
    "its types are",  # gpu_type names types the cluster has
    "name a GPU type only when",  # gpu_type only for a job that asks for GPUs
    "is named twice",  # ?gpu_type= names each type once
    "give them once",  # ?gpu_type= and the body's gpu_type agree
    "(USER_TOKEN_LIMIT)",  # a person holds at most so many active user tokens
    "in whole",  # a quantity's range and precision: a pattern cannot bound a number written with a suffix
    "among the teams you can see",  # ?team= names teams the caller can see
)


@schemathesis.check
def schema_valid_is_accepted(ctx, response, case):
    """Schemathesis' positive_data_acceptance, except for a 400 naming a rule beyond the schema."""
    if response.status_code == 400 and any(rule in response.text for rule in BEYOND_THE_SCHEMA):
        return None
    return positive_data_acceptance(ctx, response, case)


@pytest.fixture(params=CALLERS)
def caller_token(request, maps, vision, nodes, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "100000/min"}}
    # As Django's test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    if request.param == "team token":
        yield token_create(name="fuzz", team=maps)[1]
    else:
        user = request.getfixturevalue({"member": "member", "lead": "lead", "admin": "staff"}[request.param])
        yield token_create(name="fuzz", user=user)[1]
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@hypothesis_settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck),
                     derandomize=os.environ.get("CI") == "true")
def test_the_api_matches_its_schema(case, caller_token):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {caller_token}"},
        checks=[not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance,
                schema_valid_is_accepted],
    )  # fmt: skip


def test_the_schema_documents_the_error_and_dry_run_answers(client, db):
    paths = client.get("/api/schema/?format=json").json()["paths"]
    quota = paths["/api/v1/teams/{slug}/quota/"]["patch"]["responses"]
    assert {"200", "400", "401", "403", "404", "429"} <= set(quota)
    answers = quota["200"]["content"]["application/json"]["schema"]
    assert answers == {"$ref": "#/components/schemas/QuotaAnswer"}
    submit = paths["/api/v1/jobs/"]["post"]["responses"]
    assert {"200", "201", "400", "401", "403", "409", "429"} <= set(submit)
    assert set(paths["/api/v1/jobs/{id}/cancel/"]["post"]["responses"]) >= {"404", "409"}


def test_the_schema_says_the_job_spec_takes_no_unknown_fields(client, db):
    # The submission refuses an unknown field by name, at the top and in replicas, volumes,
    # resources_per_node and simulate: a client reading the schema must not take extras for allowed.
    schemas = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    for name in ("JobSpecRequest", "ReplicaInputRequest", "VolumeInputRequest", "NodeResourcesRequest",
                 "SimulateRequest"):
        assert schemas[name]["additionalProperties"] is False, name
