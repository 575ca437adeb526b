"""The admin's membership form (the memberships page and a team page's members): an add that another
writer of the person's memberships beat to it is refused, saying so, never a duplicate-key error.

Single sign-on writes a person's memberships at each login (`identity.apply_groups`) under their user
row's lock, taken first. Django's own check that a membership is new runs before the save and under no
lock, so a login that added the same membership in between made the admin's insert fail on the unique
constraint: a 500. This form takes the same lock first and checks under it, so the login and the save
run one after the other and the second finds the first's membership.

A team page checks its member rows one after another, so each row locking its own person would take
the page's locks in the page's order: two pages saved at once, each adding the person the other already
lists, would wait on each other for ever. The team page's formset (`MembershipFormSet`) locks every
person its rows name in one query, in id order, before any row is checked.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.models import BaseInlineFormSet

from tenants.admin_rows import LoadedRowForm
from tenants.models import Membership

ALREADY = "already_member"


def lock_people(people: set[int]) -> None:
    """Locks the people's user rows in one query, in id order (every writer's order, so none deadlock), FOR NO
    KEY UPDATE as the login takes them: the people's jobs and tokens are not held up."""
    if people:
        list(get_user_model().objects.select_for_update(no_key=True).filter(pk__in=people).order_by("pk")
             .values_list("pk", flat=True))  # fmt: skip


class MembershipForm(LoadedRowForm):
    """A membership whose person (before and after the edit) is locked as single sign-on locks them, before
    the membership's own row (`LoadedRowForm`): the login's order, so the two never deadlock."""

    def clean(self):
        people = {self.cleaned_data["user"].pk} if self.cleaned_data.get("user") else set()
        if self.instance.pk:
            people.add(self.instance.user_id)
        lock_people(people)  # on a team page, already locked with the page's others (`MembershipFormSet`)
        cleaned = super().clean()
        user, team = cleaned.get("user"), cleaned.get("team")
        if user is None or team is None or team.pk is None:
            return cleaned  # a new team has no members yet
        held = Membership.objects.filter(user=user, team=team).exclude(pk=self.instance.pk).first()
        if held is not None:
            raise ValidationError(
                f"{user.username} is already a {held.get_role_display().lower()} of team {team.slug} (single "
                "sign-on or another admin may have just added them); nothing was saved — open that membership "
                "to change it.",
                code=ALREADY,
            )  # fmt: skip
        return cleaned

    def validate_unique(self):
        """Django's check of the same membership, in its words, unless `clean` has told of it in its own."""
        if not self.has_error(NON_FIELD_ERRORS, code=ALREADY):
            super().validate_unique()


class MembershipFormSet(BaseInlineFormSet):
    """A team page's member rows: every person they name, before and after the edit, locked in one query in id
    order before any row is checked; each row's own lock (`MembershipForm`) then finds it already held."""

    def full_clean(self):
        if self.is_bound:
            lock_people(self._people())
        super().full_clean()

    def _people(self) -> set[int]:
        """The ids of the people the posted rows name, as posted and as stored (a malformed id is left to the
        row's own check)."""
        people = set()
        for form in self.forms:
            if form.instance.pk:
                people.add(form.instance.user_id)
            try:
                people.add(int(form.data.get(form.add_prefix("user"))))
            except (TypeError, ValueError):
                pass
        return people
