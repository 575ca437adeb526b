"""API fixtures: the persona matrix (people by session, team tokens, a revoked token, nobody) and a throttle cache.

Every persona is a ready APIClient: `as_persona("maps_token").get(...)`.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tenants.tokens import token_create, token_revoke

PEOPLE = ("owner", "member", "lead", "outsider", "staff")
TOKENS = ("maps_token", "vision_token", "revoked_token")
PERSONAS = PEOPLE + TOKENS + ("anonymous",)


@pytest.fixture(autouse=True)
def fresh_throttle(throttle_cache):
    """Every API test starts with no throttle counts (the root conftest's `throttle_cache`)."""
    return throttle_cache


@pytest.fixture
def tokens(maps, vision):
    """Token values: maps_token, vision_token and revoked_token (of maps)."""
    _, maps_value = token_create(name="ci-maps", team=maps)
    _, vision_value = token_create(name="ci-vision", team=vision)
    revoked, revoked_value = token_create(name="old", team=maps)
    token_revoke(token=revoked)
    return {"maps_token": maps_value, "vision_token": vision_value, "revoked_token": revoked_value}


@pytest.fixture
def people(owner, member, lead, outsider, staff):
    return {"owner": owner, "member": member, "lead": lead, "outsider": outsider, "staff": staff}


@pytest.fixture
def as_persona(people, tokens):
    """An APIClient signed in as a person (session), carrying a token, or anonymous."""

    def _client(persona: str) -> APIClient:
        client = APIClient()
        if persona in people:
            client.force_login(people[persona])
        elif persona in tokens:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[persona]}")
        else:
            assert persona == "anonymous", persona
        return client

    return _client


def bearer(value: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")
    return client
