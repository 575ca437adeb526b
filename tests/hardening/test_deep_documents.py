"""Deeply nested JSON and YAML are refused before parsing: a 400 (or 422 on the page) naming the limit.

Cost is shown by what runs, not by wall time (a timed test fails on a busy machine): a
document the text check refuses never reaches a parser, and one that gets past it is
composed no deeper than the limit. `bench/` is where speed is measured.

About a thousand levels once raised RecursionError (a 500), and YAML flow
nesting cost 2-3 s of CPU per request before it did.
"""

from __future__ import annotations

import pytest
import yaml

from jobs.models import Job
from jobs.spec import SpecError
from jobs.safe_yaml import load_yaml
from tenants.inputs import MAX_DEPTH, json_depth_problem, yaml_depth_problem

LIMIT = f"deeper than {MAX_DEPTH} levels"


@pytest.fixture
def parsed(monkeypatch):
    """Counts the YAML nodes the parser composes (JSON's parser is C code: its 500 was a RecursionError,
    which the status code shows)."""
    counts = {"yaml nodes": 0}
    real_compose = yaml.SafeLoader.compose_node

    def compose_node(self, *args, **kwargs):
        counts["yaml nodes"] += 1
        return real_compose(self, *args, **kwargs)

    monkeypatch.setattr(yaml.SafeLoader, "compose_node", compose_node)
    return counts


def nested_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


DEEP = {
    "a JSON list": ("application/json", "[" * 1000 + "]" * 1000),
    "a JSON mapping": ("application/json", nested_json(1000)),
    "a YAML flow list": ("application/yaml", "[" * 900 + "]" * 900),
    "a YAML flow mapping": ("application/yaml", "{a: " * 900 + "1" + "}" * 900),
    "YAML block mappings": ("application/yaml", "".join(" " * i + "a:\n" for i in range(500)) + " " * 500 + "b: 1\n"),
    "YAML block sequences": ("application/yaml", "- " * 600 + "x\n"),
}


@pytest.fixture
def api(client, owner):
    client.force_login(owner)
    return client


@pytest.mark.parametrize("content_type, body", DEEP.values(), ids=DEEP.keys())
def test_the_api_refuses_a_deep_document_before_parsing_it(api, parsed, content_type, body):
    response = api.post("/api/v1/jobs/?team=maps", data=body, content_type=content_type)
    assert parsed["yaml nodes"] == 0
    assert response.status_code == 400, response.content
    assert LIMIT in response.json()["detail"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("body", [v for ct, v in DEEP.values() if ct == "application/yaml"], ids=lambda b: b[:8])
def test_the_page_import_refuses_a_deep_document_before_parsing_it(api, parsed, body):
    response = api.post("/jobs/new/import/", {"yaml": body, "team": "maps"}, HTTP_HX_REQUEST="true")
    assert parsed["yaml nodes"] == 0
    assert response.status_code == 422
    assert LIMIT in response.content.decode()


def test_a_deep_quota_body_is_a_400_too(client, staff, maps):
    client.force_login(staff)
    response = client.patch("/api/v1/teams/maps/quota/", data=nested_json(2000), content_type="application/json")
    assert response.status_code == 400 and LIMIT in response.json()["detail"]


def test_the_limit_is_the_limit():
    assert not json_depth_problem(nested_json(MAX_DEPTH)) and json_depth_problem(nested_json(MAX_DEPTH + 1))
    flow = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert not yaml_depth_problem(flow) and yaml_depth_problem("[" + flow + "]")


@pytest.mark.parametrize(
    "text",
    ['{"command": ["' + "[" * 200 + '"]}', 'command: ["' + "{" * 200 + '"]', "args: ['" + "[" * 200 + "']",
     "# " + "[" * 200 + "\nname: x"],
    ids=["brackets in a JSON string", "in a double-quoted YAML scalar", "in a single-quoted one", "in a comment"],
)  # fmt: skip
def test_brackets_in_strings_and_comments_open_nothing(text):
    check = json_depth_problem if text.startswith("{") else yaml_depth_problem
    assert check(text) == ""


def test_a_real_manifest_is_far_below_the_limit():
    from tests.jobs.test_yaml_import import TFJOB

    assert yaml_depth_problem(TFJOB) == "" and isinstance(load_yaml(TFJOB), dict)


def test_load_yaml_names_the_limit():
    with pytest.raises(SpecError) as error:
        load_yaml("[" * 100 + "]" * 100)
    assert LIMIT in error.value.errors["yaml"][0]


def test_a_quote_in_a_plain_scalar_does_not_hide_a_deep_document(api, parsed):
    # The text check reads "it's" as opening a quoted scalar and sees no brackets after it;
    # the loader's own count (exact, and it stops at the limit) refuses the document.
    body = "name: it's\nreplicas: " + "[" * 900 + "]" * 900 + "\n"
    assert yaml_depth_problem(body) == ""
    response = api.post("/api/v1/jobs/?team=maps", data=body, content_type="application/yaml")
    assert parsed["yaml nodes"] <= MAX_DEPTH + 4, "composing stops at the limit"
    assert response.status_code == 400 and LIMIT in response.json()["detail"]


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_an_unterminated_string_of_escaped_quotes_is_read_once(api, content_type):
    body = '{"name": "' + '\\"' * 120_000
    response = api.post("/api/v1/jobs/?team=maps", data=body, content_type=content_type)
    assert response.status_code == 400
