# lakesink developer entry points. Every target that needs the environment runs scripts/bootstrap first
# (a no-op in ~0.1 s once .venv and .cache/jars are in place).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
PYTEST_ARGS ?=
# make test's pytest-xdist workers: each starts its own broker, S3 endpoint and Spark session; test files are
# dealt out whole (--dist loadfile). PYTEST_WORKERS=0 runs everything in one process. Three on this 2-core machine:
# many tests wait on brokers and subprocesses, and the suite's JVMs run C1 only (tests/conftest.py): 17.9 min for
# 2,524 tests against 21.5 min with two (2026-11-27).
PYTEST_WORKERS ?= 3

.PHONY: help bootstrap jars test unit integration docs demo dev-up dev-down dev-status

help:
	@echo "make demo        start the local stack, archive a topic with the sink, show objects + manifest, stop"
	@echo "make test        unit then integration tests (fails if no test is collected)"
	@echo "make unit        unit tests only (no services)"
	@echo "make integration integration tests only (Kafka broker, S3 endpoint, Spark)"
	@echo "make jars        download .cache/jars again (the files lakesink/runtime/jars.lock pins, checked)"
	@echo "make docs        build the docs site (mkdocs.yml, strict: broken links fail) into .cache/site"
	@echo "make dev-up      lakesink dev up   (background Kafka + S3; state in .lakesink/)"
	@echo "make dev-down    lakesink dev down"
	@echo "make dev-status  lakesink dev status"

bootstrap:
	@scripts/bootstrap

jars:
	@FORCE_JARS=1 scripts/bootstrap

# One pytest run (unit and integration tests). pytest exits 5 when it collects nothing, which fails make.
test: bootstrap
	$(PYTEST) -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS) tests/unit tests/integration

unit: bootstrap
	$(PYTEST) -q $(PYTEST_ARGS) tests/unit

integration: bootstrap
	$(PYTEST) -q $(PYTEST_ARGS) tests/integration

# The docs site, built as tests/unit/test_docs_site.py builds it in make test (strict: a broken link or anchor fails).
docs: bootstrap
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir .cache/site

# Only what the demo runs: lakesink[local], the spark and kafka jars; no registry, no class archive (scripts/bootstrap)
demo:
	@LAKESINK_BOOTSTRAP=demo scripts/bootstrap
	$(VENV)/bin/lakesink demo

dev-up: bootstrap
	$(VENV)/bin/lakesink dev up

dev-down:
	$(VENV)/bin/lakesink dev down

dev-status:
	$(VENV)/bin/lakesink dev status
