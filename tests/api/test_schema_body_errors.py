"""Every operation that takes a request body documents the 413 (a body over the size limit) and the 415 (a media
type it does not parse) that it answers: the schema's list is checked against what each operation answers."""

import pytest
from django.conf import settings

BODY_METHODS = ("post", "put", "patch")


@pytest.fixture
def schema(client):
    return client.get("/api/schema/?format=json").json()


def operations_with_a_body(schema) -> list[tuple[str, str, dict]]:
    return [(method, path, operation) for path, operations in schema["paths"].items()
            for method, operation in operations.items() if method in BODY_METHODS and "requestBody" in operation]  # fmt: skip


def test_each_operation_with_a_body_documents_the_413_and_415_it_answers(schema, as_persona, maps):
    staff = as_persona("staff")  # allowed to call each of them
    operations = operations_with_a_body(schema)
    assert {("post", "/api/v1/jobs/"), ("put", "/api/v1/teams/{slug}/quota/"), ("post", "/api/v1/tokens/")} <= {
        (method, path) for method, path, _ in operations}
    too_big = b'{"name": "' + b"x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b'"}'
    for method, path, operation in operations:
        url = path.replace("{slug}", maps.slug)
        send = getattr(staff, method)
        answered = (send(url, too_big, content_type="application/json").status_code,
                    send(url, "name=x", content_type="application/x-www-form-urlencoded").status_code)  # fmt: skip
        assert answered == (413, 415), (method, path, answered)
        assert {"413", "415"} <= set(operation["responses"]), (method, path, sorted(operation["responses"]))
        assert operation["responses"]["413"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"}


def test_an_operation_without_a_body_documents_neither(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if isinstance(operation, dict) and "requestBody" not in operation:
                assert not {"413", "415"} & set(operation.get("responses", {})), (method, path)
