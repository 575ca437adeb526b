"""During an upgrade the old worker and notifier run on until the migrate Job is done, and nothing kills a
new pod waiting for it.

Worker, notifier and beat wait for the schema in an init container (`deploy/entrypoint.sh wait-for-schema`,
at most SCHEMA_WAIT seconds): a pod is not Ready before its containers start, so a rolling update that may
take no pod away first keeps the old one, and no liveness probe watches an init container. Beat is
replaced by Recreate, so no beat runs until the migrations are done (README, "Deploying").
"""

import pytest

from tests.deploy.manifests import by_kind, source_objects

DEPLOYMENTS = by_kind(source_objects(), "Deployment")
WAITING = ["gangway-worker", "gangway-notifier", "gangway-beat"]


def pod(name: str) -> dict:
    return DEPLOYMENTS[name]["spec"]["template"]["spec"]


@pytest.mark.parametrize("name", WAITING)
def test_the_pod_waits_for_the_schema_in_an_init_container_before_its_process_starts(name):
    [init] = pod(name)["initContainers"]
    [main] = pod(name)["containers"]
    assert init["args"] == ["wait-for-schema"] and init["image"] == main["image"]
    assert init["envFrom"] == main["envFrom"]  # the same database, and the same SCHEMA_WAIT when set
    assert {mount["mountPath"] for mount in init["volumeMounts"]} == {m["mountPath"] for m in main["volumeMounts"]}


@pytest.mark.parametrize("name", ["gangway-worker", "gangway-notifier"])
def test_the_old_pod_runs_until_the_new_one_is_ready(name):
    strategy = DEPLOYMENTS[name]["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0 and strategy["rollingUpdate"]["maxSurge"] >= 1

