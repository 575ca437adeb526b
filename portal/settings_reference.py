"""Every environment variable Gangway reads, declared once: name, default and meaning.

The README's configuration table is printed from here (`manage.py
settings_reference`), and tests keep the three in line: every variable the
code reads is declared here with the default the code uses, every declared
variable is read somewhere, and the README shows exactly this table.
`settings.py` keeps its readers (`portal.env`) next to what they configure;
the test compares their literal defaults with `value` below.
"""

from __future__ import annotations

from dataclasses import dataclass

# A default the code computes (from DEBUG, another setting, the project path).
COMPUTED = object()

# Where a variable is read: by the Django settings (and the modules they
# configure), or by the container's entrypoint and gunicorn.
APP, IMAGE = "app", "image"


@dataclass(frozen=True)
class Setting:
    name: str
    value: object  # the default as the code writes it, or COMPUTED
    meaning: str
    shown: str = ""  # the default as a person reads it; derived from `value` when empty
    unit: str = ""
    secret: bool = False  # belongs in a Secret, never in a ConfigMap or an image
    read_by: str = APP

    @property
    def default(self) -> str:
        """Returns the default as the README shows it."""
        if self.shown:
            return self.shown
        if isinstance(self.value, bool):
            return "on" if self.value else "off"
        if self.value in ("", None):
            return "none"
        if isinstance(self.value, str):
            return f"`{self.value}`"
        return f"{self.value} {self.unit}".strip()


SETTINGS: tuple[Setting, ...] = (
    # -- Django ------------------------------------------------------------------
    Setting("DJANGO_DEBUG", False, "Debug mode; the demo turns it on. Never on in production."),
    Setting("DEBUG_ERROR_PAGES", True, "In debug, Django's own pages for an unknown address, a bad request (a Host "
            "header not in `ALLOWED_HOSTS`) or an error (the URLs tried, a traceback); off: the portal's 400, 404 and "
            "500 pages, the traceback in the log, and static files served by the web process as without debug, a "
            "missing one answered by the portal's 404. `make demo` turns it off. Without debug, always the portal's."),
    Setting("SECRET_KEY", COMPUTED, "Django's signing key: long and random (or `SECRET_KEY_FILE`, a mounted file). "
            "The commands `plan`, `replay`, `manifest` and `settings_reference` run without one.",
            shown="required unless debug", secret=True),
    Setting("ALLOWED_HOSTS", COMPUTED, "Comma-separated host names the portal answers to; an IPv6 address "
            "listed bare is accepted in brackets too, as a Host header writes it (`[fd00::5]:8000`).",
            shown="`127.0.0.1,localhost` in debug, else none"),
    Setting("CSRF_TRUSTED_ORIGINS", "", "Comma-separated origins (`https://gangway.example.com`) behind a TLS proxy."),
    Setting("TIME_ZONE", "UTC", "Time zone of dates shown on pages; clock times in reasons name it (\"from about 16:30 UTC\")."),
    Setting("GANGWAY_VAR_DIR", COMPUTED, "Writable folder for the demo's SQLite file, embedded broker and beat's schedule.",
            shown="`var/` in the project"),
    Setting("STATIC_ROOT", COMPUTED, "Where `collectstatic` puts static files; served by the web process when present.",
            shown="`static/` in `GANGWAY_VAR_DIR`"),
    # -- Database, broker and caches ---------------------------------------------
    Setting("DATABASE_URL", COMPUTED, "e.g. `postgres://user:pass@host:5432/gangway`.",
            shown="SQLite in `GANGWAY_VAR_DIR`", secret=True),
    Setting("DATABASE_PREPARED_STATEMENTS", True, "PostgreSQL plans each repeated statement once per connection. "
            "Turn off behind a pooler in transaction mode (PgBouncer before 1.21)."),
    Setting("CELERY_BROKER_URL", "filesystem://localhost/", "e.g. `redis://host:6379/0`; the default is an embedded "
            "file-system broker for the demo.", secret=True),
    Setting("CELERY_RESULT_BACKEND", COMPUTED, "Where task results go; rarely needed.",
            shown="the broker (files in the demo)", secret=True),
    Setting("CELERY_TASK_ALWAYS_EAGER", False, "Run tasks inline in the caller; for debugging only."),
    Setting("REDIS_URL", COMPUTED, "Redis for what every process shares: API throttling, a job's log reads "
            "shared between its viewers, the worker's task-failure counts for /metrics. Without it and a Redis "
            "broker, each process keeps its own.",
            shown="the broker when it is Redis (`redis://`, or `rediss://` over TLS)", secret=True),
    Setting("API_RATE", "600/min", "API requests per person (all their user tokens and their session share it) or "
            "per team (all its team tokens share it), per second, minute, hour or day."),
    Setting("USER_TOKEN_LIMIT", 20, "Active user tokens one person may hold; creating one more is refused until "
            "one is revoked or expires."),
    Setting("TOKEN_MAX_LIFETIME", 0, "The longest an API token may live, in days; a token asked for longer, or for never, is "
            "refused, and one created without a lifetime gets this one. 0: a token may never expire.", shown="0 (no limit)"),
    Setting("PAGE_RATE", "120/min", "Posts per signed-in user to the pages that submit or preview (the submit form, "
            "its fit preview and YAML import, the quota editor)."),
    # -- Scheduling ----------------------------------------------------------------
    Setting("CLUSTER_BACKEND", "simulated", "`simulated` or `kubernetes` (in-cluster service account or `KUBECONFIG`)."),
    Setting("KUBECONFIG", COMPUTED, "Kubeconfig file used with the Kubernetes backend outside a cluster.",
            shown="`~/.kube/config`"),
    Setting("ADMISSION_INTERVAL", 5, "How often beat runs an admission cycle.", unit="s"),
    Setting("RECONCILE_INTERVAL", 5, "How often beat reconciles job states with the cluster.", unit="s"),
    Setting("FIT_PREVIEW_REUSE", 5, "The submit form's fit previews and the quota editor's what-ifs in one web "
            "process plan against one reading of the queue and the cluster for at most this long, while nothing "
            "a page shows has changed; 0 reads them for each preview.", unit="s"),
    Setting("ADMISSION_TIMEOUT", 600, "An admitted job not fully running by then is evicted and requeued (R13), and "
            "so is a running job some of whose replicas have waited this long to start again (a pod lost with its "
            "node, made again, that no node takes or whose image cannot be pulled); a job being preempted that the "
            "cluster has refused to stop for this long runs on, counted in its team's quota.", unit="s"),
    Setting("CYCLE_FAILURES_BEFORE_UNREADY", 3, "`/readyz` fails, and staff see a banner, once this many admission "
            "cycles in a row have failed."),
    Setting("STARVATION_AFTER", 1800, "A job waiting longer than this starves: it holds its team, or reserves room (R4).", unit="s"),
    Setting("MAX_RESERVATIONS", 1, "How many starving jobs may reserve room at once (R4); 0 reserves none."),
    Setting("RESERVATION_SLACK", 600, "A reservation keeps its nodes while they give a start within this of the "
            "best (R4); a running job past its expected end is expected to end this long from now (R14).", unit="s"),
    Setting("MIN_RUNTIME_BEFORE_PREEMPTION", 600, "Thrash guard for priority preemption within a team (R5).", unit="s"),
    Setting("MAX_QUEUED_PER_TEAM", 1000, "Queued jobs a team may have; a submission past it is refused "
            "(the API answers 409) until some start or are cancelled. Jobs adopted from the cluster are "
            "not refused. 0: no cap."),
    Setting("DEFAULT_RUNTIME", 86400, "Runtime assumed for estimates when a job sets no `max_runtime`.", unit="s"),
    Setting("ENDED_JOB_RETENTION", 604800, "How long the cluster keeps a job's object and pods (its logs) once the "
            "job ended; then reconcile deletes them, its record and events staying in Gangway. Objects of jobs "
            "adopted from elsewhere are their owners'. 0: kept until deleted by hand.", unit="s"),
    Setting("CYCLE_RETENTION", 604800, "How long the admission cycles' rows and the teams' GPU usage samples are "
            "kept; each cycle deletes older ones (`/metrics` goes on counting the cycles deleted). At least 86400: "
            "the team page's chart shows the last 24 h.", unit="s"),
    # -- Simulated cluster and demo ------------------------------------------------
    Setting("SIM_DEFAULT_DURATION", 180, "How long a simulated job runs unless it says otherwise.", unit="s"),
    Setting("SIM_FAILURE_RATE", 0, "Share of simulated jobs that fail, 0 to 1.", shown="0"),
    Setting("SIM_SEED", 7, "Seed of the simulated cluster's randomness."),
    Setting("DEMO_TRAFFIC", 0, "The demo's made-up traffic: seconds between two looks at the queue, each "
            "submitting a job while fewer than four wait (a Katib sweep once in a while); 0: none. Simulated "
            "cluster only; `make demo` sets 40.", unit="s"),
    Setting("DEMO_PASSWORD", "demo", "Password of the demo users `seed_demo` creates.", secret=True),
    # -- Operations ----------------------------------------------------------------
    Setting("LOG_LEVEL", "INFO", "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`."),
    Setting("LOG_FORMAT", "plain", "`plain` lines, or `json`: one object per line with the decision's job, team, "
            "rule and reason."),
    Setting("METRICS_TOKEN", "", "`/metrics` asks for `Authorization: Bearer <token>`; without it `/metrics` "
            "answers 403, unless `METRICS_PUBLIC` opens it.", secret=True),
    Setting("METRICS_PUBLIC", COMPUTED, "Without `METRICS_TOKEN`, serve `/metrics` (every team's queue, quotas "
            "and usage) to whoever reaches the web; off: 403. A token, when set, is asked for either way.",
            shown="on in debug, else off"),
    Setting("GANGWAY_POLICY", "", "`python` (any case) runs the admission policy interpreted even when a build compiled "
            "with mypyc matches its sources (`make policy`; the plans are the same).",
            shown="none (compiled when built)"),
    Setting("GANGWAY_NATIVE_DIR", COMPUTED, "Folder of the policy's compiled build "
            "(`python -m scheduling.policy build`), named by a digest of the sources it was made from; "
            "a relative path is read from the project folder.",
            shown="`var/native` in the project folder"),
    Setting("GANGWAY_TRACES_DIR", COMPUTED, "Folder holding the GPU-cluster traces `manage.py replay` reads "
            "(`philly.csv`, `philly_vc.csv`).", shown="`shared/traces` beside the project folder"),
    # -- Single sign-on (OpenID Connect) --------------------------------------------
    Setting("OIDC_RP_CLIENT_ID", "", "Client id at the identity provider; setting it turns single sign-on on.",
            shown="none (SSO off)"),
    Setting("OIDC_RP_CLIENT_SECRET", "", "Client secret at the identity provider.", secret=True),
    Setting("OIDC_OP_AUTHORIZATION_ENDPOINT", "", "The provider's authorization endpoint URL."),
    Setting("OIDC_OP_TOKEN_ENDPOINT", "", "The provider's token endpoint URL."),
    Setting("OIDC_OP_USER_ENDPOINT", "", "The provider's userinfo endpoint URL."),
    Setting("OIDC_OP_JWKS_ENDPOINT", "", "The provider's JSON Web Key Set URL (to check token signatures)."),
    Setting("OIDC_RP_SIGN_ALGO", "RS256", "Signature algorithm of ID tokens: `RS256`, `ES256` or `HS256`."),
    Setting("OIDC_RP_SCOPES", "openid email profile groups", "Scopes asked for at login."),
    Setting("OIDC_GROUPS_CLAIM", "groups", "The claim that lists the user's groups."),
    Setting("OIDC_GROUP_MAP", "", "Groups to teams and roles, applied at each login: "
            "`ml-maps=maps:member,ml-maps-leads=maps:lead,platform=staff`."),
    # -- Notifications ---------------------------------------------------------------
    Setting("EMAIL_BACKEND", COMPUTED, "Django's mail backend for notifications.",
            shown="the console in debug, else SMTP"),
    Setting("EMAIL_HOST", "localhost", "SMTP server notifications are sent through."),
    Setting("EMAIL_PORT", 25, "Its port."),
    Setting("EMAIL_HOST_USER", "", "User name at the SMTP server."),
    Setting("EMAIL_HOST_PASSWORD", "", "Password at the SMTP server.", secret=True),
    Setting("EMAIL_USE_TLS", False, "STARTTLS to the SMTP server."),
    Setting("DEFAULT_FROM_EMAIL", "gangway@localhost", "Sender of notification e-mails."),
    Setting("PUBLIC_URL", "", "The portal's address (`https://gangway.example.com`), for links in notifications.",
            shown="none (no links)"),
    Setting("NOTIFY_BATCH_SECONDS", 10, "A delivery made this soon after another to the same receiver (a person's "
            "e-mail, a team's webhook) waits this long, so that a burst (a sweep starting, a reclaim) goes out as one "
            "digest; a lone one goes at once. 0: nothing waits.", unit="s"),
    Setting("JOB_TOKEN_MAX_AGE", 2592000, "How long the token a job's pods get (GANGWAY_JOB_TOKEN, to report "
            "checkpoints) stays valid; pods get GANGWAY_URL and the token only when PUBLIC_URL is set.", unit="s"),
    Setting("DELIVERY_RETENTION", 2592000, "How long the record of a notification sent or failed is kept (the "
            "notifications page lists the latest); then beat deletes it, the job's events staying. One pending or "
            "waiting for a retry is kept. A notice that an API token expires goes as long after it was made, once "
            "its token no longer authenticates. 0: kept for good; else at least 86400, so that a notification "
            "worked out again within a day finds it went out and tells nobody twice.", unit="s"),
    Setting("WEBHOOK_ALLOW_HTTP", COMPUTED, "Let team webhooks use plain `http://` URLs.", shown="on in debug, else off"),
    Setting("WEBHOOK_ALLOW_PRIVATE", COMPUTED, "Let team webhooks post to loopback, private and link-local "
            "addresses (off: refused when saved and when sent, and posts go straight to the receiver, never "
            "through `HTTPS_PROXY`; no redirects are followed either way).",
            shown="on in debug, else off"),
    Setting("WEBHOOK_DEADLINE", 5, "How long one webhook post may take in all: looking up the host, connecting, "
            "posting and its answer. A post given up on before it went out is retried; one given up on after is "
            "recorded as sent, its answer unknown. Above 0, at most half the worker's soft time limit (50 s).",
            unit="s"),
    Setting("EMAIL_DEADLINE", 30, "How long one e-mail's whole SMTP session may take: looking up the mail server, "
            "connecting, STARTTLS, the commands, the message and its confirmation. Given up on as a webhook post "
            "is. Above 0, at most half the worker's soft time limit (50 s).", unit="s"),
    # -- Login and browser security -------------------------------------------------
    Setting("AXES_FAILURE_LIMIT", 5, "Failed logins for one username from one address before a lockout."),
    Setting("AXES_COOLOFF_MINUTES", 15, "How long a lockout lasts; staff can clear it in the admin.", unit="min"),
    Setting("PROXY_COUNT", 0, "Reverse proxies in front of Gangway (an Ingress: 1): login lockouts and the API's "
            "throttle of anonymous calls take the client's address that many entries from the right of "
            "X-Forwarded-For; 0: the connection's address. More than there are lets a client choose its address."),
    Setting("SECURE_SSL_REDIRECT", COMPUTED, "Redirect plain HTTP to HTTPS (probes and /metrics are exempt).",
            shown="on unless debug"),
    Setting("SECURE_COOKIES", COMPUTED, "Session and CSRF cookies only over HTTPS.", shown="on unless debug"),
    Setting("SECURE_HSTS_SECONDS", COMPUTED, "Strict-Transport-Security max-age.", shown="1 year unless debug"),
    Setting("SECURE_HSTS_INCLUDE_SUBDOMAINS", True, "HSTS covers subdomains too."),
    Setting("SECURE_HSTS_PRELOAD", COMPUTED, "Mark HSTS as preloadable (submitting the domain stays a choice).",
            shown="on unless debug"),
    Setting("TRUST_X_FORWARDED_PROTO", False, "Behind a TLS-terminating proxy: trust its `X-Forwarded-Proto`."),
    # -- Container -----------------------------------------------------------------
    Setting("PORT", "8000", "Port gunicorn listens on in the image.", shown="8000", read_by=IMAGE),
    Setting("WEB_CONCURRENCY", 2, "gunicorn worker processes per web container.", read_by=IMAGE),
    Setting("WEB_THREADS", 8, "Threads per gunicorn worker process: requests one web container serves at once "
            "are `WEB_CONCURRENCY` x `WEB_THREADS`, so a long download or a slow read holds one thread, not the "
            "pages' polls. Each thread keeps a PostgreSQL connection of its own, reused for 60 s: a web container may "
            "hold as many (16 by default).", read_by=IMAGE),
    Setting("WORKER_CONCURRENCY", "2", "Celery worker processes per worker or notifier container.", shown="2", read_by=IMAGE),
    Setting("SCHEMA_WAIT", "600", "How long a worker, notifier or beat waits at start (on Kubernetes, in its init "
            "container) for the database to have every migration it needs (an upgrade's migrate Job) before it "
            "gives up and is started again.", shown="600 s",
            read_by=IMAGE),
)

BY_NAME = {setting.name: setting for setting in SETTINGS}


def markdown_table() -> str:
    """Returns the configuration table in Markdown, one row per variable, ending with a newline."""
    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.default} | {s.meaning} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"
