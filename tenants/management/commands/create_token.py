from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from tenants.models import Team
from tenants.tokens import TokenLimitReached, default_lifetime, lifetime_problem, token_create


class Command(BaseCommand):
    help = "Create an API token for a team (or, with --user, for a user) and print it once on standard output."

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--team", help="Team slug: a team token that acts for this team only.")
        target.add_argument("--user", help="Username: a user token that acts as this user.")
        parser.add_argument("--name", required=True, help="What the token is for, e.g. ci-main.")
        parser.add_argument("--max-tier", help="Team tokens: the highest tier it may submit to.")
        parser.add_argument("--expires-in-days", type=int, metavar="DAYS",
                            help="Days until it expires (default: TOKEN_MAX_LIFETIME's days, or never when that is 0).")

    def handle(self, *args, team: str | None, user: str | None, name: str, max_tier: str | None,
               expires_in_days: int | None, **options):  # fmt: skip
        tier = None
        days = expires_in_days if expires_in_days is not None else default_lifetime()
        if problem := lifetime_problem(days):
            raise CommandError(problem)
        if team:
            team_row = Team.objects.filter(slug=team).first()
            if team_row is None:
                known = ", ".join(Team.objects.values_list("slug", flat=True)) or "none yet"
                raise CommandError(f"No team {team!r}; the teams are {known}.")
            if max_tier:
                tier = team_row.tiers.filter(name=max_tier).first()
                if tier is None:
                    allowed = ", ".join(team_row.tiers.values_list("name", flat=True)) or "none"
                    raise CommandError(f"Team {team} may not use tier {max_tier!r}; it may use {allowed}.")
            token, value = token_create(name=name, team=team_row, max_tier=tier, days=days)
            what = f"team {team}" + (f", up to tier {tier.name}" if tier else "")
        else:
            if max_tier:
                raise CommandError("--max-tier applies to team tokens only.")
            person = get_user_model().objects.filter(username=user).first()
            if person is None:
                raise CommandError(f"No user {user!r}.")
            try:
                token, value = token_create(name=name, user=person, days=days)
            except TokenLimitReached as error:
                raise CommandError(str(error)) from None
            what = f"user {user}"
        # The token alone on stdout, so `TOKEN=$(manage.py create_token ...)` works; the note on stderr.
        self.stdout.write(value)
        until = f"; it expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "; it never expires"
        self.stderr.write(f"Created token {name!r} ({token.prefix}...) for {what}{until}. It is shown this once; "
                          "store it now.")  # fmt: skip
