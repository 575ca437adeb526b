"""How many requests the API server gets from the job page's logs, per viewer and for a hundred viewers.

Counts the requests of the Kubernetes adapter against the local fake API server (real HTTP) for one
read of the job page's logs part, then works out the figures per minute from the page's poll
(every 10 s) and the shared read (one per FRESH_SECONDS for all viewers of a job):

    PYTHONPATH=. DJANGO_DEBUG=1 DJANGO_SETTINGS_MODULE=portal.settings python bench/log_requests.py

Prints one line per job size; nothing is timed.
"""

from __future__ import annotations

import django

django.setup()

from kubernetes.client import Configuration  # noqa: E402

from scheduling.cluster.base import PICK  # noqa: E402
from scheduling.cluster.kubernetes import KubernetesCluster  # noqa: E402
from scheduling.cluster.kubernetes_api import client_for  # noqa: E402
from scheduling.logs import FRESH_SECONDS, PAGE_TAIL  # noqa: E402
from tests.cluster.fake_apiserver import FakeApiServer  # noqa: E402
from tests.cluster.test_kubernetes_adapter import _replica_pod  # noqa: E402

POLL_SECONDS = 10  # the job page's logs part
VIEWERS = 100


def requests_per_read(fake: FakeApiServer, cluster: KubernetesCluster, replicas: int, lines_of) -> int:
    fake.reset()
    for index in range(replicas):
        fake.add(_replica_pod(index, {"running": {}}))
        fake.write_log("maps", f"resnet-g12-worker-{index}", "".join(f"step {n}\n" for n in range(200)))
    cluster.logs("maps", 12, tail=PAGE_TAIL, lines_of=lines_of)
    return len(fake.requests)


def main() -> None:
    fake = FakeApiServer().start()
    cluster = KubernetesCluster(client_for(Configuration(host=fake.url)))
    try:
        print(f"job page logs: poll every {POLL_SECONDS} s, one read shared per {FRESH_SECONDS} s "
              "by a job's viewers")
        for replicas in (1, 8, 64):
            every = requests_per_read(fake, cluster, replicas, None)
            one = requests_per_read(fake, cluster, replicas, PICK)
            alone = 60 / POLL_SECONDS  # one viewer: each poll is a read
            shared = 60 / FRESH_SECONDS  # many viewers of one job: at most one read per window
            print(f"{replicas:>3} replicas: {every:>3} requests a read of every replica's lines, {one} of one "
                  f"replica's; one viewer {alone * every:>5.0f} -> {alone * one:>3.0f} requests/min; "
                  f"{VIEWERS} viewers of one job {shared * every:>5.0f} -> {shared * one:>3.0f}; "
                  f"{VIEWERS} viewers of {VIEWERS} jobs {VIEWERS * alone * every:>6.0f} -> {VIEWERS * alone * one:>5.0f}")
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
