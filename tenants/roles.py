"""A member's role in a team. Its own module, free of models, because the settings read it
at start-up (OIDC_GROUP_MAP names roles) before any model can load."""

from django.db.models import TextChoices


class Role(TextChoices):
    MEMBER = "member", "Member"
    LEAD = "lead", "Lead"
