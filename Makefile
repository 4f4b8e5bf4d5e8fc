# Hub: `make run` serves the whole hub in one process; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: run test test-embedded chaos bench lint clean

# A person at the first `make run` sees pip's progress; CI (CI=true) keeps its log short.
PIP_QUIET := $(if $(filter true 1 yes,$(CI)),--quiet,)

$(BIN)/python:
	@echo "Creating the virtual environment $(VENV) (first run only)…"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	@echo "Installing Hub's requirements into $(VENV) (first run only, a few minutes)…"
	$(BIN)/pip install $(PIP_QUIET) -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	@echo "Installing the test tools into $(VENV)…"
	$(BIN)/pip install $(PIP_QUIET) -r requirements-dev.txt
	touch $@

# One Django start: runhub migrates, makes the first admin account, then serves.
run: $(VENV)/.installed
	$(BIN)/python manage.py runhub --migrate --ensure-admin

# By default the suite runs in one process. With TEST_WORKERS=N it runs in three parts
# (docs/operations.md): most tests on N pytest-xdist workers at once, each with its own test
# database, Redis database (REDIS_URL's plus its index) and data directory; then the chaos tests
# and those marked `serial`, SERIAL_WORKERS (2) at a time; then those marked `alone` in one
# process. Every part always runs; any failing fails the target. A part with no test selected
# (pytest's 5, e.g. when PYTEST_ARGS names only serial tests) is no failure, unless no part ran one.
TEST_WORKERS ?= 0
SERIAL_WORKERS ?= 2
define run_suite
	@if [ "$(TEST_WORKERS)" = 0 ]; then $(1) $(BIN)/pytest $(2) $(PYTEST_ARGS); exit $$?; fi; \
	parallel=0; serial=0; alone=0; \
	$(1) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --part parallel $(2) $(PYTEST_ARGS) || parallel=$$?; \
	$(1) $(BIN)/pytest -n $(SERIAL_WORKERS) --dist loadfile --part serial $(2) $(PYTEST_ARGS) || serial=$$?; \
	$(1) $(BIN)/pytest --part alone $(2) $(PYTEST_ARGS) || alone=$$?; \
	echo "make: parallel part exited $$parallel, serial part exited $$serial, alone part exited $$alone"; \
	if [ $$parallel = 5 ] && [ $$serial = 5 ] && [ $$alone = 5 ]; then exit 5; fi; \
	for rc in $$parallel $$serial $$alone; do [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done
endef

# The whole suite: on PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set, embedded otherwise.
test: $(VENV)/.installed-dev
	$(call run_suite,,)

# The embedded mode alone (SQLite, in-memory layer, in-process worker), whatever the environment says.
test-embedded: $(VENV)/.installed-dev
	$(call run_suite,env -u DATABASE_URL -u REDIS_URL,-m "not needs_redis and not needs_postgres")

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
