# xdn — every target creates or reuses the local virtualenv and installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
PROTOS := $(shell find protos -name '*.proto')

.PHONY: demo test test-long test-fast test-stress bench proto lint java xmlsec1 iproute2 strace curl clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== installing xdn and its dependencies into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,audit]'
	@rm -f $(VENV)/.installed-* && touch $@

# PySpark needs a Java runtime (17 or newer). Install it when missing and we may.
java:
	@if ! command -v java >/dev/null 2>&1; then \
	  echo "== Java not found: installing openjdk-17-jre-headless (needed by PySpark)"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else echo "error: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless) and rerun" >&2; exit 1; fi; \
	fi

# The interop tests run Debian's xmlsec1 on the codec's XML Encryption output. Install it when
# missing and we may.
xmlsec1:
	@if ! command -v xmlsec1 >/dev/null 2>&1; then \
	  echo "== xmlsec1 not found: installing xmlsec1 (needed by the interop tests)"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xmlsec1 >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xmlsec1 >/dev/null; \
	  else echo "error: install xmlsec1 (e.g. apt-get install xmlsec1) and rerun" >&2; exit 1; fi; \
	fi

# The network-namespace integration test runs sites as separate hosts with iproute2's `ip netns`.
strace:
	@if ! command -v strace >/dev/null 2>&1; then \
	  echo "== strace not found: installing strace (needed by the power-loss simulation)"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null; \
	  else echo "error: install strace (e.g. apt-get install strace) and rerun" >&2; exit 1; fi; \
	fi

curl:
	@if ! command -v curl >/dev/null 2>&1; then \
	  echo "== curl not found: installing curl (the README tour uses it)"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; \
	  else echo "error: install curl (e.g. apt-get install curl) and rerun" >&2; exit 1; fi; \
	fi

iproute2:
	@if ! command -v ip >/dev/null 2>&1; then \
	  echo "== ip not found: installing iproute2 (needed by the network-namespace test)"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; \
	  else echo "error: install iproute2 (e.g. apt-get install iproute2) and rerun" >&2; exit 1; fi; \
	fi

demo: $(STAMP) java
	$(VENV)/bin/xdn demo

# Test processes in parallel: one per core, at most 4 (each test starts daemons of its own).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? n : 4 )))

test: $(STAMP) java xmlsec1 iproute2 strace
	$(PY) -m pytest -q -m "not long" -n $(JOBS)

# The heavy multi-process scenarios (a dishonest site, namesakes, limits under abuse, leases,
# revocation of sites, twenty sites): a few minutes more; CI runs them after `make test`.
test-long: $(STAMP) java xmlsec1 iproute2 strace curl
	$(PY) -m pytest -q -m long -n $(JOBS)

# Not in CI: the whole suite RUNS times (default 5) while busy loops keep every core loaded.
RUNS ?= 5
test-stress: $(STAMP) java xmlsec1 iproute2 strace curl
	$(PY) tests/stress.py --runs $(RUNS)

# Not in CI: coverage-guided fuzzing (atheris) of every parser of outside bytes, FUZZ_BUDGET
# executions per target (a full run: hours); the corpus replay first. Summary in
# build/fuzz/summary.json; findings in build/fuzz/TARGET/findings (see tests/fuzz/fuzz_driver.py).
FUZZ_BUDGET ?= 1000000
.PHONY: fuzz
fuzz: $(STAMP)
	@$(PY) -c 'import atheris' 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check -e '.[fuzz]'
	$(PY) -m pytest -q -m fuzz tests/fuzz
	$(PY) tests/fuzz/fuzz_driver.py --budget $(FUZZ_BUDGET)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not spark and not integration"

bench: $(STAMP) java
	$(PY) -m benchmarks

proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy xdn disseminator publisher subscriber audit deploy

clean:
	rm -rf build
