"""The teams the submission's R10 check reads in one query are the teams the admission loop reads."""

from scheduling.snapshot import policy_team, policy_teams, replica_defaults, teams_with_quotas
from tenants.models import Quota, Team


def test_the_one_query_read_gives_every_team_as_the_loop_sees_it(maps, vision):
    Quota.objects.create(team=maps, resource="cpu", nominal=64000, default_per_replica=2000)
    Quota.objects.create(team=maps, resource="memory", nominal=512 * 1024**3, lending_limit=0,
                         default_per_replica=4 * 1024**3)  # fmt: skip
    Team.objects.create(slug="idle", name="Idle", weight=2.5)  # no quota rows at all

    read = policy_teams()

    teams = teams_with_quotas()
    assert list(read) == [team.slug for team in teams] == ["idle", "maps", "vision"]
    for team in teams:
        assert read[team.slug] == (policy_team(team), replica_defaults(team))
    assert read["maps"][1] == {"cpu": 2000, "memory": 4 * 1024**3}
    assert read["idle"][0].nominal == {}


def test_it_is_one_query(maps, vision, django_assert_num_queries):
    with django_assert_num_queries(1):
        policy_teams()
