"""The demo's people hear of their own jobs: once the demo's loop has started some, each person's notifications
page lists the e-mails sent to them under "Sent lately", and the mail itself stays on the machine (the console).

Runs as deploy/demo.sh sets the demo up (SQLite, the simulated cluster, the console's mail), in a scratch folder,
with tasks run where they are sent instead of on the demo's worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUN_THE_DEMO = """
import json
import django
from django.core.management import call_command

django.setup()
call_command("migrate", interactive=False, verbosity=0)
call_command("seed_demo", verbosity=0)
call_command("seed_demo_notifications")
call_command("seed_demo_notifications")  # safe to rerun: nobody is subscribed twice
for _ in range(3):  # admission, then reconcile sees the admitted jobs running
    call_command("cycle")

from django.contrib.auth.models import User
from django.test import Client

from notifications.models import Delivery
from notifications.selectors import recent_deliveries

pages = {}
for username in ("admin", "lead", "engineer"):
    user = User.objects.get(username=username)
    client = Client()
    client.force_login(user)
    body = client.get("/notifications/").content.decode()
    pages[username] = {"sent": sorted({(d.target, d.state, d.event.kind) for d in recent_deliveries(user)}),
                       "lists them": "Nothing sent yet" not in body and all(
                           f"{d.job.name} #{d.job.pk}" in body for d in recent_deliveries(user))}
print(json.dumps(pages))
"""


def demo_env(var_dir: Path) -> dict:
    keep = {key: value for key, value in os.environ.items()
            if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_", "EMAIL_"))}  # fmt: skip
    return {**keep, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "CLUSTER_BACKEND": "simulated",
            "GANGWAY_VAR_DIR": str(var_dir), "ALLOWED_HOSTS": "testserver", "CELERY_TASK_ALWAYS_EAGER": "1",
            "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}  # fmt: skip


def test_each_demo_user_is_told_when_their_jobs_start_and_reads_it_on_their_notifications_page(tmp_path):
    run = subprocess.run([sys.executable, "-c", RUN_THE_DEMO], cwd=ROOT, env=demo_env(tmp_path), capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    pages = json.loads(run.stdout.strip().splitlines()[-1])
    for username in ("admin", "lead", "engineer"):
        assert (f"{username}@example.com", "sent", "running") in map(tuple, pages[username]["sent"]), pages
        assert pages[username]["lists them"], username
        assert f"To: {username}@example.com" in run.stdout  # written by the console, sent nowhere
    assert "Demo notifications: admin, engineer, lead told of their own jobs by e-mail (3 subscribed)" in run.stdout
    assert "Demo notifications: nobody new told" in run.stdout


def test_the_demos_notifications_refuse_a_mail_server(tmp_path):
    env = {**demo_env(tmp_path), "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend"}
    run = subprocess.run([sys.executable, "manage.py", "seed_demo_notifications"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 1
    assert ("The demo's mail must stay on this machine, but EMAIL_BACKEND is "
            "django.core.mail.backends.smtp.EmailBackend") in run.stderr  # fmt: skip
