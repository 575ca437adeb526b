"""The Celery application shared by the web process, the workers and beat."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("gangway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _prepare_embedded_broker() -> None:
    """Create the folders of the file-system broker; the transport expects them."""
    from pathlib import Path

    options = app.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder", "processed_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
    backend = str(app.conf.result_backend or "")
    if backend.startswith("file://"):
        Path(backend.removeprefix("file://")).mkdir(parents=True, exist_ok=True)


@app.on_after_configure.connect
def _on_configure(sender, **kwargs) -> None:
    _prepare_embedded_broker()
