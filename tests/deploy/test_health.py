"""/healthz says the process answers; /readyz checks the database, the broker and the API server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from tests.deploy.ports import closed_port

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_touching_anything(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_when_the_database_and_broker_answer(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"] == {"status": "ok", "vendor": "postgresql"}
    assert body["checks"]["broker"]["status"] == "ok"
    assert "cluster" not in body["checks"]  # the simulated backend has no API server


def test_readyz_answers_503_naming_the_broker_when_it_is_unreachable(client):
    with override_settings(CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port()}/0"):
        response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not ready"
    assert body["failing"] == ["broker"]
    assert "Connection refused" in body["checks"]["broker"]["error"]
    assert body["checks"]["database"]["status"] == "ok"


def test_readyz_checks_the_api_server_with_the_kubernetes_backend(client, tmp_path, monkeypatch):
    server = _version_server()
    try:
        monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_port}")))
        with override_settings(CLUSTER_BACKEND="kubernetes"):
            response = client.get("/readyz")
    finally:
        server.shutdown()

    assert response.status_code == 200
    assert response.json()["checks"]["cluster"] == {"status": "ok", "version": "v1.33.1"}


def test_readyz_names_the_cluster_when_the_api_server_is_down_unless_excluded(client, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, f"http://127.0.0.1:{closed_port()}")))
    with override_settings(CLUSTER_BACKEND="kubernetes"):
        down = client.get("/readyz")
        excluded = client.get("/readyz?exclude=cluster")

    assert down.status_code == 503
    assert down.json()["failing"] == ["cluster"]
    assert "cannot reach the API server" in down.json()["checks"]["cluster"]["error"]
    assert excluded.status_code == 200
    assert excluded.json()["checks"]["cluster"] == {"status": "excluded"}


def _kubeconfig(tmp_path, server: str):
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "users": [{"name": "test", "user": {"token": "t"}}],
    }))  # fmt: skip
    return path


def _version_server() -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"gitVersion": "v1.33.1"} if self.path.rstrip("/") == "/version" else {}).encode()
            self.send_response(200 if self.path.rstrip("/") == "/version" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.django_db
@override_settings(CYCLE_FAILURES_BEFORE_UNREADY=2)
def test_readyz_fails_once_cycles_fail_in_a_row_and_staff_see_a_banner(client):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from scheduling.models import Cycle

    now = timezone.now()
    Cycle.objects.create(started_at=now, duration=0.1, failed=True, error="boom")
    assert client.get("/readyz").status_code == 200, "one failure is not a streak"
    Cycle.objects.create(started_at=now, duration=0.1, failed=True, error="boom")
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["failing"] == ["cycles"]
    staff = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
    engineer = get_user_model().objects.create_user("eng", password="pw")
    client.force_login(engineer)
    assert b"admission loop is failing" not in client.get("/").content
    client.force_login(staff)
    assert b"admission loop is failing" in client.get("/").content
    Cycle.objects.create(started_at=now, duration=0.1)
    assert client.get("/readyz").status_code == 200
    assert b"admission loop is failing" not in client.get("/").content
