# xdn — every target creates or reuses the local virtualenv and installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
PROTOS := $(shell find protos -name '*.proto')

.PHONY: demo test test-long test-fast test-stress test-browser faults fuzz soak bench proto lint java xmlsec1 iproute2 strace curl chromium clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "== installing xdn and its dependencies into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,audit]'
	@rm -f $(VENV)/.installed-* && touch $@

# System tools some suites need, installed with apt when missing and we may (root or sudo):
# $(call ensure,COMMANDS,PACKAGES,WHY) — WHY without commas.
define ensure
	@missing=; for c in $(1); do command -v $$c >/dev/null 2>&1 || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  echo "== $(1) not found: installing $(2) ($(3))"; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then sudo=; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then sudo=sudo; \
	  else echo "error: install $(2) (e.g. apt-get install $(2)) and rerun" >&2; exit 1; fi; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
	fi
endef

java:  # PySpark needs a Java runtime (17 or newer)
	$(call ensure,java,openjdk-17-jre-headless,needed by PySpark)
xmlsec1:  # the interop tests run Debian's xmlsec1 on the codec's XML Encryption output
	$(call ensure,xmlsec1,xmlsec1,needed by the interop tests)
strace:  # the power-loss simulation traces a site's writes
	$(call ensure,strace,strace,needed by the power-loss simulation)
curl:  # the README tour uses it
	$(call ensure,curl,curl,the README tour uses it)
chromium:  # the web console's browser test drives chromium through chromedriver (selenium)
	$(call ensure,chromium chromedriver,chromium chromium-driver,the console's browser test)
iproute2:  # the network-namespace test runs sites as separate hosts with `ip netns`
	$(call ensure,ip,iproute2,needed by the network-namespace test)

demo: $(STAMP) java
	$(VENV)/bin/xdn demo

# Test processes in parallel: one per core, at most 4 (each test starts daemons of its own).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? n : 4 )))

# make test's own tests wait on daemons and disks about half the time: two per core (at most 4)
# keep both cores busy (9 minutes on 2 idle cores; 14.5 with one per core).
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( 2 * n < 4 ? 2 * n : 4 )))

test: $(STAMP) java xmlsec1 iproute2 strace chromium
	$(PY) -m pytest -q -m "not long and not faults" -n $(TEST_JOBS)

# Only the web console in a headless chromium (also part of `make test`: it takes ~15 s).
test-browser: $(STAMP) chromium
	$(PY) -m pytest -q -m browser

# The heavy multi-process scenarios (a dishonest site, namesakes, limits under abuse, leases,
# revocation of sites, twenty sites): a few minutes more; CI runs them after `make test`.
test-long: $(STAMP) java xmlsec1 iproute2 strace curl
	$(PY) -m pytest -q -m long -n $(JOBS)

# Not in CI: the fault campaign of issue #18 (tests/faults): 5 sites, 20 subscribers, 100 seeded
# kills, pauses and link cuts over 100,000 fragments, then the audit; about half an hour. Its
# summary is printed and written to build/faults/summary.json.
faults: $(STAMP) java iproute2
	$(PY) -m pytest -q -s -m faults tests/faults

# Not in CI: the whole suite RUNS times (default 5) while busy loops keep every core loaded.
RUNS ?= 5
test-stress: $(STAMP) java xmlsec1 iproute2 strace curl chromium
	$(PY) tests/stress.py --runs $(RUNS) -- -m "not faults"

# Not in CI: coverage-guided fuzzing (atheris) of every parser of outside bytes, FUZZ_RUNS
# executions per target (a full run: hours), FUZZ_JOBS targets at once (low priority: FUZZ_NICE);
# the corpus replay first. Per target: executions, exec/s, exec per CPU-second, findings; all in
# build/fuzz/summary.json, findings in build/fuzz/TARGET/findings (see docs/fuzzing.md).
FUZZ_RUNS ?= $(or $(FUZZ_BUDGET),1000000)
FUZZ_JOBS ?= 1
FUZZ_NICE ?= 0
fuzz: $(STAMP)
	@$(PY) -c 'import atheris' 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check -e '.[fuzz]'
	$(PY) -m pytest -q -m fuzz tests/fuzz
	nice -n $(FUZZ_NICE) $(PY) tests/fuzz/fuzz_driver.py --budget $(FUZZ_RUNS) --jobs $(FUZZ_JOBS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not spark and not integration"

# Not in CI: the soak of issue #18 (tests/soak): 3 sites, 2 publishers, 12 subscribers (4 joining
# and leaving) at half the probed maximum rate for SOAK_SECONDS (default an hour); RSS, open
# descriptors and queue depths over time in build/soak/soak.html, figures in build/soak/summary.json.
SOAK_SECONDS ?= 3600
soak: $(STAMP)
	$(PY) tests/soak/soak_driver.py --duration $(SOAK_SECONDS) --out build/soak

bench: $(STAMP) java
	$(PY) -m benchmarks

proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy xdn cli disseminator publisher subscriber audit deploy benchmarks console

clean:
	rm -rf build
