"""Fixtures of the tenants' admin tests: two admins, each with a page of their own open."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client


def admin_as(username: str) -> Client:
    """A client logged in as a new superuser named `username`."""
    client = Client()
    client.force_login(get_user_model().objects.create_superuser(username, f"{username}@example.com", "pw"))
    return client


@pytest.fixture
def alice(maps):
    return admin_as("alice")


@pytest.fixture
def bob(maps):
    return admin_as("bob")
