# hookbay: `make run` (the whole stack with demo data) and `make test` (everything, against real services).
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help install infra-up infra-down infra-status run test test-infra-up test-infra-down lint format bench clean \
        deploy-check deploy-check-apiserver images compose-check

export UV_CACHE_DIR ?= $(CURDIR)/.cache/uv
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
            HOOKBAY_INFRA_PG_PORT=$(TEST_PG_PORT)
PYTEST_WORKERS ?= 2

help:
	@echo "make run        install everything, start the whole stack with demo data (Ctrl-C stops it)"
	@echo "make test       install everything, start real Kafka/FerretDB/Redis, lint, run all tests"
	@echo "make lint       ruff + mypy (strict)"
	@echo "make bench      benchmarks; figures go to docs/benchmarks.md"
	@echo "make infra-up / infra-down / infra-status   only the local Kafka, FerretDB and Redis"
	@echo "make deploy-check   verify the Helm chart offline (lint, schemas, unit tests, promtool, kube-score)"
	@echo "make deploy-check-apiserver   install the chart into a real kube-apiserver (built once, ~15 min)"
	@echo "make images         build every image locally (Debian base by debootstrap; cached)"
	@echo "make compose-check  run the compose stack end to end, then leave the host as it was"

$(UV):
	@mkdir -p .cache/tools
	python3 -m venv .cache/tools
	.cache/tools/bin/pip install -q --disable-pip-version-check uv==$(UV_VERSION)

.venv/.synced: $(UV) uv.lock pyproject.toml libs/common/pyproject.toml $(wildcard services/*/pyproject.toml)
	$(UV) sync --frozen --all-packages --python 3.11 -q
	@touch $@

install: .venv/.synced
	@$(INFRA) install

infra-up: install
	@$(INFRA) up

infra-down:
	@$(INFRA) down

infra-status:
	@$(INFRA) status

lint: .venv/.synced
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen mypy

format: .venv/.synced
	$(UV) run --frozen ruff check --fix .
	$(UV) run --frozen ruff format .

run: install
	@.venv/bin/python scripts/run.py

test: install lint
	@$(TEST_ENV) $(INFRA) up
	@set -o pipefail; status=0; \
	  $(TEST_ENV) HOOKBAY_TEST_KAFKA=127.0.0.1:$(TEST_KAFKA_PORT) \
	  HOOKBAY_TEST_MONGO=mongodb://127.0.0.1:$(TEST_MONGO_PORT) \
	  HOOKBAY_TEST_REDIS=redis://127.0.0.1:$(TEST_REDIS_PORT) \
	  $(UV) run --frozen pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS) || status=$$?; \
	  $(TEST_ENV) $(INFRA) down; exit $$status

bench: install
	@$(INFRA) up
	$(UV) run --frozen python scripts/bench.py

clean: infra-down
	rm -rf .venv .cache/run .cache/test-run

# --- deployables (issue 17): tools, images and engine state under .cache/ (deploy/check, deploy/docker)
deploy-check: .venv/.synced
	@deploy/check/run.sh

deploy-check-apiserver: deploy-check
	@deploy/check/apiserver.sh

images: $(UV)
	@deploy/docker/engine.sh install
	@deploy/docker/with-engine.sh deploy/docker/images.sh

compose-check: $(UV)
	@deploy/docker/engine.sh install
	@deploy/docker/compose-check.sh
