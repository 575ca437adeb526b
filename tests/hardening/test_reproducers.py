"""Every reproducer once found by probing as an attacker and as a bad day would, replayed against today's code.

Each one answers 4xx with a sentence, saves nothing, or leaks nothing. Where a test elsewhere replays a
reproducer exactly, it is named here rather than written twice:

- GPU nominal above 2,147,483,647 (it overflowed a usage column after the creates, so every cycle rolled
  back and the next one admitted into the same room): refused on the API, the quota page and the admin, and
  the largest accepted nominal lets a cycle commit, here; a record phase that always fails never over-admits,
  tests/scheduling/test_faults.py::test_the_issue_reproducer_a_record_that_always_fails_never_over_admits and,
  over HTTP, tests/cluster/test_loop_on_apiserver.py::test_cycles_that_fail_after_creating_never_over_admit.
- `?dry_run=True`, `on`, `null` on the quota API: tests/hardening/test_flags.py (every spelling); as Python
  requests sends `params={"dry_run": True}`, here.
- JSON nested about 1,000 deep, YAML flow nesting about 900 deep, on the API and the page import, refused
  before a parser runs: tests/hardening/test_deep_documents.py (the quota API too).
- "NaN" and ".nan" as cpu or memory on the API, the form and the fit preview, and on the quota page:
  tests/hardening/test_numbers_and_text.py (the `NOT_NUMBERS` tests and the quota page's).
- NUL or a lone surrogate in command, args or env: test_the_api_refuses_text_postgresql_cannot_store and
  test_the_form_refuses_nul_in_every_field in tests/hardening/test_numbers_and_text.py.
- NUL in a team slug in a URL: test_nul_in_a_url_is_a_4xx_not_a_500 there too.
- Quota page values 1e30 and weight=1e308: test_the_quota_page_refuses_what_is_not_an_amount_or_beyond_its_range
  and test_the_quota_page_holds_the_weight_to_its_range there.
- Another team's job name and id in reclaim events read with a team token: tests/hardening/test_event_leaks.py;
  that the token also gets 404 for that job, here.
- The API server's address in waiting reasons and /api/v1/cluster/ during an outage: here, through the
  Kubernetes adapter pointed at an address nothing listens on.
- Jobs the plan meant to admit whose creates fail with 503 keep "Waiting for the next admission cycle.": here,
  on the fake API server; with the simulated cluster,
  tests/scheduling/test_faults.py::test_creates_that_fail_leave_the_jobs_admitted_saying_so_until_the_cluster_answers.
- A victim's message quoting usage from before the cycle's own admissions:
  tests/scheduling/test_faults.py::test_victims_read_the_numbers_of_this_cycle_and_no_other_teams_job.
- Unknown top-level manifest keys dropped with `unsupported: []`: tests/jobs/test_yaml_import.py
  (test_unknown_top_level_keys_are_listed_too and test_the_api_answers_them_in_unsupported).
- `replicas-TOTAL_FORMS=100000` (3.6 s a post) and pages without a rate limit: tests/hardening/test_page_limits.py.

Found since, replaying these with other fields (here): a lone surrogate in a key or an unknown resource,
quoted back in the API's answer; one in any value of a YAML pasted on the page import, written back into
the filled form; a quota PATCH naming a resource without its nominal (a null stored in a NOT NULL column);
an API path with a line break, answered by the HTML 404 page.
"""

from __future__ import annotations

import json
import socket

import pytest
import requests
from kubernetes.client import ApiClient, Configuration
from rest_framework.test import APIClient

from jobs.models import Job
from jobs.selectors import in_queue_order
from scheduling.cluster.kubernetes import KubernetesCluster
from scheduling.cluster.simulated import SimulatedCluster
from scheduling.loop import admission_cycle
from scheduling.models import Cycle, UsageSample
from scheduling.reconcile import reconcile
from tenants.inputs import INT32_MAX, QUOTA_MAX
from tenants.models import AuditEntry, Quota
from tenants.tokens import token_create
from tests.cluster.fake_apiserver import FakeApiServer
from tests.hardening.test_event_leaks import reclaim  # noqa: F401  (fixtures)
from tests.hardening.test_numbers_and_text import admin, api  # noqa: F401
from tests.hardening.test_one_answer import through_manage_py

WHOLE_NODE = [{"role": "Worker", "count": 1, "gpu": 8}]
NEW_JOB_REASON = "Waiting for the next admission cycle."


def gpu_nominal() -> int:
    return Quota.objects.get(team__slug="maps", resource="gpu").nominal


# -- A GPU nominal beyond 32 bits --------------------------------------------------------


def test_a_gpu_nominal_beyond_32_bits_is_refused_on_every_path(admin, maps):
    body = {"quotas": {"gpu": {"nominal": INT32_MAX + 1}}}
    response = admin.patch("/api/v1/teams/maps/quota/", body, content_type="application/json")
    assert response.status_code == 400 and "nominal" in json.dumps(response.json())
    page = admin.post("/teams/maps/quota/", {"weight": "1", "gpu_nominal": str(INT32_MAX + 1)})
    assert page.status_code == 422
    assert gpu_nominal() == 8 and not AuditEntry.objects.exists()


def test_the_largest_gpu_nominal_accepted_lets_the_cycle_commit_its_record(admin, submit, nodes):
    body = {"quotas": {"gpu": {"nominal": QUOTA_MAX["gpu"], "borrowing_limit": 0}}}
    assert admin.patch("/api/v1/teams/maps/quota/", body, content_type="application/json").status_code == 200
    job = submit(replicas=WHOLE_NODE)
    result = admission_cycle(cluster=SimulatedCluster())
    assert result.admitted == 1 and not result.error
    job.refresh_from_db()
    assert job.state == "admitted"
    assert not Cycle.objects.filter(failed=True).exists()
    assert UsageSample.objects.get(team__slug="maps").gpu_nominal == QUOTA_MAX["gpu"]


# -- dry_run as a client library spells it -------------------------------------------------


@pytest.mark.parametrize("value, saves", [(True, False), ("on", False), (False, True)])
def test_dry_run_as_python_requests_sends_it_previews_or_saves_as_meant(admin, value, saves):
    sent = requests.Request("PATCH", "http://testserver/api/v1/teams/maps/quota/", params={"dry_run": value})
    url = sent.prepare().url
    response = admin.patch(url.removeprefix("http://testserver"), {"quotas": {"gpu": {"nominal": 3}}},
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 200
    assert gpu_nominal() == (3 if saves else 8)


def test_dry_run_null_is_a_400_and_saves_nothing(admin):
    response = admin.patch("/api/v1/teams/maps/quota/?dry_run=null", {"quotas": {"gpu": {"nominal": 3}}},
                           content_type="application/json")  # fmt: skip
    assert response.status_code == 400 and "dry_run" in response.json()
    assert gpu_nominal() == 8


# -- Reclaim events read with a team token ---------------------------------------------------


def test_a_team_token_gets_404_for_the_reclaiming_job_and_no_name_or_id_of_it_in_events(reclaim, vision):
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(name='ci', team=vision)[1]}")
    claimer = reclaim["maps"][0]
    assert token.get(f"/api/v1/jobs/{claimer.pk}/").status_code == 404
    assert token.get(f"/api/v1/jobs/{claimer.pk}/events/").status_code == 404
    texts = [event["message"] for victim in reclaim["vision"]
             for event in token.get(f"/api/v1/jobs/{victim.pk}/events/?page_size=500").json()["results"]]  # fmt: skip
    assert any("team maps" in text for text in texts), "the reclaim is told, by the team that asked"
    assert [text for text in texts if claimer.name in text or f"#{claimer.pk}" in text] == []


# -- An outage, seen by people ---------------------------------------------------------------


@pytest.fixture
def unreachable():
    """A Kubernetes adapter pointed at a local port nothing listens on; returns (cluster, port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return KubernetesCluster(ApiClient(Configuration(host=f"http://127.0.0.1:{port}")), retry_budget=0.2), port


def test_an_outage_never_shows_the_api_servers_address_to_people(unreachable, submit, owner, nodes, client):
    cluster, port = unreachable
    job = submit()
    result = admission_cycle(cluster=cluster)
    assert result.error and f"port={port}" in Cycle.objects.latest().error, "operators read the address in the row"
    job.refresh_from_db()
    assert job.state == "queued" and job.reason_code == "cluster_unreachable"
    client.force_login(owner)
    readable = {
        "the reason": job.reason,
        "the job's events": str(client.get(f"/api/v1/jobs/{job.pk}/events/").json()),
        "the job API": str(client.get(f"/api/v1/jobs/{job.pk}/").json()),
        "/api/v1/cluster/": str(client.get("/api/v1/cluster/").json()),
        "the queue API": str(client.get("/api/v1/queue/").json()),
        "the job page": client.get(f"/jobs/{job.pk}/").content.decode(),
        "the dashboard": client.get("/").content.decode(),
    }
    # The address as the error names it (host='127.0.0.1', port=N); a bare N could be any number on a page.
    address = ("127.0.0.1", f"port={port}", f":{port}")
    assert [where for where, text in readable.items() if any(part in text for part in address)] == []
    assert client.get("/api/v1/cluster/").json()["last_cycle"]["error"] == "The cluster cannot be reached."


# -- Creates that fail with 503 ----------------------------------------------------------------


@pytest.fixture
def apiserver():
    server = FakeApiServer().start()
    yield server
    server.stop()


def test_jobs_whose_creates_answer_503_say_so_instead_of_waiting_for_the_next_cycle(apiserver, tiers, owner):
    from jobs.services import job_submit
    from jobs.spec import parse_spec
    from tests.cluster.test_loop_on_apiserver import _node
    from tests.conftest import make_team, spec_data

    for name in ("n1", "n2"):
        apiserver.add(_node(name))
    team = make_team("big", tiers, gpu=16, borrowing_limit=0)
    apiserver.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})
    for k in range(2):
        job_submit(team=team, owner=owner, spec=parse_spec(spec_data(team="big", name=f"j{k}", replicas=WHOLE_NODE)))
    cluster = KubernetesCluster(ApiClient(Configuration(host=apiserver.url)), retry_budget=0.3)
    apiserver.fail(503, method="POST", path="tfjobs", times=1000)
    result = admission_cycle(cluster=cluster)
    assert result.admitted == 2 and result.error
    jobs = list(Job.objects.order_by("pk"))
    assert [(j.state, j.reason_code) for j in jobs] == [("admitted", "create_pending")] * 2
    assert all(NEW_JOB_REASON not in j.reason and "cannot be reached" in j.reason for j in jobs)
    assert all(apiserver.url.removeprefix("http://") not in j.reason for j in jobs)
    apiserver.heal()
    assert reconcile(cluster=cluster).created == 2
    assert {j.reason_code for j in Job.objects.all()} == {""}
    assert len(apiserver.list("TFJob")) == 2


# -- Found since, replaying the ones above with other fields -------------------------------------

SURROGATE = "\ud800"


def test_an_answer_quoting_a_lone_surrogate_writes_it_as_its_escape(admin, nodes):
    """An unknown key or resource is named in the answer; UTF-8 has no bytes for a lone surrogate (once a 500)."""
    body = json.dumps({"team": "maps", "name": "x", "image": "busybox", "replicas": [{"role": "Worker"}],
                       SURROGATE: 1})  # fmt: skip
    response = admin.post("/api/v1/jobs/", data=body, content_type="application/json")
    assert response.status_code == 400 and b"\\ud800" in response.content
    quota = json.dumps({"quotas": {SURROGATE: {"nominal": 1}}})
    response = admin.patch("/api/v1/teams/maps/quota/", data=quota, content_type="application/json")
    assert response.status_code == 400 and "Unknown resource \ud800" in response.json()["quotas"][0]
    assert admin.get("/api/v1/jobs/").content.decode("utf-8"), "other answers stay UTF-8"


@pytest.mark.parametrize("text, where", [
    pytest.param('team: maps\nname: "x\\uD800"\nimage: busybox\nreplicas: [{role: Worker}]\n', "name holds",
                 id="in the name"),
    pytest.param('team: maps\nname: x\nimage: busybox\nreplicas: [{role: Worker, "\\uD800": 1}]\n',
                 "A key in replicas[0] holds", id="in a key"),
    pytest.param('team: maps\nname: x\nimage: busybox\nreplicas: [{role: Worker, cpu: "\\uDC00"}]\n',
                 "replicas[0].cpu holds", id="in a replica's cpu"),
])  # fmt: skip
def test_the_page_import_refuses_a_lone_surrogate_naming_where_it_is(api, nodes, text, where):
    response = api.post("/jobs/new/import/", {"yaml": text, "team": "maps"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert f"{where} a lone surrogate (not a character)" in response.content.decode()



@pytest.mark.parametrize("limits", [{}, {"borrowing_limit": 2}, {"lending_limit": 0}])
def test_a_patch_of_a_resource_without_its_nominal_is_a_400_not_a_null_nominal(admin, limits):
    response = admin.patch("/api/v1/teams/maps/quota/", {"quotas": {"gpu": limits}}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "nominal included" in response.json()["quotas"]["gpu"]["nominal"][0]
    assert gpu_nominal() == 8 and not AuditEntry.objects.exists()


@pytest.mark.parametrize("path", ["/api/v1/jobs/1%0A/checkpoint/", "/api/v1/%0A", "/api/v1/queue/%0D%0A"])
def test_an_api_path_with_a_line_break_is_a_json_404(admin, path):
    response = admin.post(path, {}, content_type="application/json")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert "No API endpoint" in response.json()["detail"]


@pytest.mark.parametrize("path, hint", [
    ("/api/v1/jobs", "did you mean /api/v1/jobs/ (with the trailing slash)?"),
    ("/api/v1/nope", "see /api/schema/swagger/ for the endpoints."),
    ("/api/v1/totally/made/up", "see /api/schema/swagger/ for the endpoints."),
])  # fmt: skip
def test_an_unknown_api_path_suggests_the_slash_only_where_it_leads_somewhere(admin, path, hint):
    response = admin.get(path)
    assert response.status_code == 404 and response.json()["detail"] == f"No API endpoint at {path}; {hint}"


def test_manage_py_submit_refuses_a_file_that_is_not_utf8(tmp_path, owner):
    assert through_manage_py(tmp_path, b"\xff\xfe" + "name: x\n".encode("utf-16-le")) == (
        f"{tmp_path / 'job.yaml'} is not UTF-8 text; a job's YAML must be.")  # fmt: skip


def test_the_queue_puts_jobs_without_a_position_last_on_every_database():
    assert '"position" ASC NULLS LAST' in str(in_queue_order(Job.objects.all()).query)
