"""The live OpenAPI schema, fuzzed with Schemathesis through the WSGI app: no 5xx, answers match the schema.

The schema is fetched from /api/schema/ at collection; every call carries a
staff user's token, so every operation (quota changes too) is reached. A
bounded number of examples per operation keeps the run short.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from tenants.tokens import token_create

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def staff_token(staff, maps, vision, nodes, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "100000/min"}}
    # As Django's test client does: the test's transaction must outlive each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield token_create(name="fuzz", user=staff)[1]
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@hypothesis_settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_matches_its_schema(case, staff_token):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {staff_token}"},
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )
