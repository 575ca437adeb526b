"""Reads whose SQL is built once (portal.compiled): the same rows and instances as the ORM's, read fresh each call."""

from __future__ import annotations

import pytest
from django.db.models import Model
from django.utils import timezone

from portal.compiled import CompiledQuery
from scheduling.models import ClusterNode
from scheduling.preview import _known_nodes
from scheduling.snapshot import policy_teams
from tenants.models import ApiToken, PriorityTier, Quota, Team
from tenants.selectors import tiers_of
from tenants.tokens import token_create, token_for_value, token_revoke
from tests.conftest import make_user


def columns_of(obj: Model | None) -> dict | None:
    return None if obj is None else {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def orm_token(value: str) -> ApiToken:
    return ApiToken.objects.select_related("team", "user", "max_tier").get(pk=token_for_value(value).pk)


def test_a_team_token_comes_back_as_the_orm_builds_it_with_its_relations_cached(maps, tiers, django_assert_num_queries):
    _, value = token_create(name="ci", team=maps, max_tier=tiers["standard"])
    with django_assert_num_queries(1):
        token = token_for_value(value)
        assert (token.team.slug, token.user, token.max_tier.name) == ("maps", None, "standard")
    expected = orm_token(value)
    for got, want in ((token, expected), (token.team, expected.team), (token.max_tier, expected.max_tier)):
        assert type(got) is type(want) and columns_of(got) == columns_of(want)
    assert not token._state.adding and token._state.db == "default"


def test_a_user_token_comes_back_with_its_user_and_no_team(db, django_assert_num_queries):
    user = make_user("ada")
    _, value = token_create(name="laptop", user=user)
    with django_assert_num_queries(1):
        token = token_for_value(value)
        assert (token.team, token.user.username, token.max_tier) == (None, "ada", None)
    assert columns_of(token.user) == columns_of(orm_token(value).user)


def test_an_unknown_token_is_none_and_a_revoked_one_is_read_fresh(maps):
    token, value = token_create(name="ci", team=maps)
    assert token_for_value("gw_nosuchtoken") is None
    assert token_for_value(value).revoked_at is None
    token_revoke(token=token)
    assert token_for_value(value).revoked_at is not None


def test_a_teams_tiers_are_its_own_in_tier_order_and_read_fresh(maps, tiers):
    assert [t.name for t in tiers_of(maps)] == [t.name for t in maps.tiers.all()] == ["production", "standard", "experiment"]
    maps.tiers.remove(tiers["production"])
    assert [t.name for t in tiers_of(maps)] == ["standard", "experiment"]
    assert all(type(t) is PriorityTier and not t._state.adding for t in tiers_of(maps))


def test_nodes_and_quotas_are_read_fresh_on_every_call(maps, vision):
    ClusterNode.objects.create(name="node-1", position=0, gpu=8, cpu=64000, memory=2**30, seen_at=timezone.now())
    assert [n.gpu for n in _known_nodes()[0]] == [8]
    ClusterNode.objects.filter(name="node-1").update(gpu=4, outside_gpu=1)
    nodes, outside = _known_nodes()
    assert [n.gpu for n in nodes] == [4] and [(o.node, o.gpu) for o in outside] == [("node-1", 1)]
    assert policy_teams()["maps"][0].nominal["gpu"] == 8
    Quota.objects.filter(team=maps).update(nominal=2)
    assert policy_teams()["maps"][0].nominal["gpu"] == 2


def test_a_marker_that_does_not_reach_the_parameters_once_fails_loudly(db):
    query = CompiledQuery(lambda slug: Team.objects.filter(slug="maps").values_list("slug"), "marker")
    with pytest.raises(ValueError, match="appears 0 times"):
        query("vision")
