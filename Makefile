# Gangway: `make demo` runs the whole product on this machine; `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test policy services browser check bench clean

# The virtual environment is reused while pyproject.toml is unchanged.
$(VENV)/.app: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@touch $@

$(VENV)/.test: $(VENV)/.app pyproject.toml
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

demo: $(VENV)/.app
	PORT=$(PORT) ./deploy/demo.sh

## PostgreSQL and Redis on their standard ports; started when installed but not running.
services:
	@./deploy/services.sh

## Debian's Chromium for the browser tests (Playwright drives /usr/bin/chromium).
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## The policy compiled with mypyc (var/native/): loaded only while it matches the sources.
policy: $(VENV)/.test
	$(PY) -m scheduling.policy build

# Every test on the compiled policy, then the policy's own tests again on the interpreted
# one, with those that watch its insides (marked interpreted_policy). The tests run in
# TEST_PROCESSES processes (pytest-xdist; 0 runs them in this one), each with its own test
# database, broker keys and cache keys (portal/test_settings.py).
TEST_PROCESSES ?= 2
test: $(VENV)/.test services browser policy
	$(PY) -m pytest -n $(TEST_PROCESSES)
	GANGWAY_POLICY=python $(PY) -m pytest -n $(TEST_PROCESSES) tests/policy

check: $(VENV)/.test
	DJANGO_DEBUG=1 $(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf var test-artifacts
