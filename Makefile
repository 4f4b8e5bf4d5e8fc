# Hub: `make run` serves the whole hub in one process; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: run test test-embedded chaos bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python manage.py runhub

# The whole suite: on PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set, embedded otherwise.
test: $(VENV)/.installed-dev
	$(BIN)/pytest $(PYTEST_ARGS)

# The embedded mode alone (SQLite, in-memory layer, in-process worker), whatever the environment says.
test-embedded: $(VENV)/.installed-dev
	env -u DATABASE_URL -u REDIS_URL $(BIN)/pytest -m "not needs_redis and not needs_postgres" $(PYTEST_ARGS)

# A longer loop of the chaos tests (real workers SIGKILLed mid-reply); prints the counts as JSON.
CHAOS_KILLS ?= 100
chaos: $(VENV)/.installed-dev
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} \
	CHAOS_KILLS=$(CHAOS_KILLS) $(BIN)/pytest tests/chaos $(PYTEST_ARGS)

bench: $(VENV)/.installed-dev
	$(BIN)/python -m bench

# ruff, then the import contracts of .importlinter (which module may import which).
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) var .pytest_cache
