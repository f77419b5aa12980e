# Set-up, run and test. `make run` and `make test` build .venv from uv.lock first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.8
HOST ?= 127.0.0.1
PORT ?= 8000
export UV_PROJECT_ENVIRONMENT := $(VENV)
# A local install's own secret key, read by agentsite/settings.py when DJANGO_SECRET_KEY is unset.
SECRET_KEY_FILE := $(or $(AGENT_DATA_DIR),data)/secret_key

.PHONY: install run test lint typecheck bench clean mcp-reference oidc-provider docs docs-install docs-build

install: $(VENV)/.installed $(SECRET_KEY_FILE)
	@# The project's own bytecode, compiled ahead (only what changed): where Python never
	@# writes it at import (PYTHONDONTWRITEBYTECODE), every process would compile each
	@# module it loads at every start, 0.3 s of CPU for a manage.py command, which the tests'
	@# servers, workers and command lines paid hundreds of times.
	@$(PY) -m compileall -q -j 0 agent agentsite sessions_app cron_app skills_app mcp_app teams_app tests bench scripts manage.py

$(VENV)/.installed: pyproject.toml uv.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@test -x $(VENV)/bin/uv || $(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv sync --frozen --compile-bytecode --quiet
	@touch $@

$(SECRET_KEY_FILE):
	@mkdir -p $(@D)
	@umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))' > $@

# `serve` runs the system checks, and refuses to start on a failed one in a line of its own.
run: install
	$(PY) manage.py migrate --noinput --skip-checks -v0
	$(PY) manage.py ensure_login --skip-checks
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/deptry .
	@# tests/, bench/ and scripts/ may import the dev group too, and need not use every dependency.
	$(VENV)/bin/deptry tests bench scripts --exclude '\.venv' --ignore DEP002,DEP004

typecheck: install
	$(VENV)/bin/mypy

test: lint typecheck docs-build
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory mcp-reference oidc-provider; \
	else echo "npm is missing: the reference MCP server's and the identity provider's tests will be skipped"; fi
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The manual (docs/, mkdocs.yml): its own dependency group, added beside the others (--inexact)
# and again whenever the main sync has run since. `docs` serves it while it is edited;
# `docs-build` fails on any warning: a broken link or anchor, a page left out of the nav.
DOCS_PORT ?= 8002
export NO_MKDOCS_2_WARNING := 1

docs-install: $(VENV)/.installed-docs

$(VENV)/.installed-docs: $(VENV)/.installed
	$(VENV)/bin/uv sync --frozen --inexact --group docs --quiet
	@touch $@

docs: docs-install
	$(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-build: docs-install
	$(VENV)/bin/mkdocs build --strict --site-dir $(or $(DOCS_SITE_DIR),site)

# Every benchmark at a modest size, then one table; BENCH_ARGS="--full" for their own sizes.
bench: install
	$(PY) bench/all.py $(BENCH_ARGS)

# The reference MCP server the MCP client's tests talk to (Node.js 20+), installed once into a
# project-local cache. Pinned: a new release must not change what the tests see.
MCP_REFERENCE_VERSION := 2026.8.31
MCP_REFERENCE_DIR := .cache/npm

mcp-reference: $(MCP_REFERENCE_DIR)/.installed-$(MCP_REFERENCE_VERSION)

$(MCP_REFERENCE_DIR)/.installed-$(MCP_REFERENCE_VERSION):
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ (Debian: apt-get install nodejs npm)"; exit 1; }
	npm install --prefix $(MCP_REFERENCE_DIR) --no-audit --no-fund --loglevel=error @modelcontextprotocol/server-filesystem@$(MCP_REFERENCE_VERSION)
	@touch $@

# A real OpenID Connect provider for the sign-in tests (tests/oidc_provider/provider.js runs
# it), pinned and installed the same way, into a folder of its own beside the MCP server's.
OIDC_PROVIDER_VERSION := 9.13.3
OIDC_PROVIDER_DIR := $(MCP_REFERENCE_DIR)/oidc-provider

oidc-provider: $(OIDC_PROVIDER_DIR)/.installed-$(OIDC_PROVIDER_VERSION)

$(OIDC_PROVIDER_DIR)/.installed-$(OIDC_PROVIDER_VERSION):
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ (Debian: apt-get install nodejs npm)"; exit 1; }
	npm install --prefix $(OIDC_PROVIDER_DIR) --no-audit --no-fund --loglevel=error oidc-provider@$(OIDC_PROVIDER_VERSION)
	@touch $@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
