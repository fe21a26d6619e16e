# Two set-up commands: `make run` (demo on the embedded runtime) and `make test`.
# Each creates its own virtualenv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LINT_VENV := .venv-lint
STAMP := $(VENV)/.installed

.PHONY: run dev test test-3.13 layer layer-check check-protocol test-size ui-check lint bench load fuzz sim mutants schemathesis clean

$(STAMP): pyproject.toml shared/requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/pixivflow demo

# The local dev server (README "Develop locally"): both HTTP functions on 127.0.0.1:$(PORT), moto, the
# queue pumps, the schedules on the wall clock (SPEED=n: n times faster) and the sweep (every
# SWEEP_INTERVAL minutes: one of template.yaml's SweepIntervalMinutes values, its default if unset). Without
# CONFIG it runs the demo config with a loopback downstream and the fake Pixiv.
PORT ?= 8000
SPEED ?= 1
MOTO_PORT ?= 0
dev: $(STAMP)
	$(VENV)/bin/pixivflow dev --port $(PORT) --speed $(SPEED) --moto-port $(MOTO_PORT) $(if $(STATE_DIR),--state-dir $(STATE_DIR)) $(if $(SWEEP_INTERVAL),--sweep-interval $(SWEEP_INTERVAL)) $(if $(CONFIG),--config $(CONFIG),--demo)

# Three workers on the two cores (pytest-xdist; worksteal: a worker that runs out of tests takes
# another's, so all finish together): the suite's socket timeouts, subprocesses and loopback servers
# leave a core idle about a sixth of the time, which a third worker fills (2 workers: 133 s, 3: 115 s,
# 4: 119 s on the 2-core machine). Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: each worker
# compiled and assertion-rewrote every module at every run otherwise (10 s of CPU per worker).
# Budget: 4 minutes on the 2-core machine; tests/README.md says how test sizes keep it.
TEST_WORKERS ?= 3
PYTEST_PARALLEL = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal
test: $(STAMP)
	$(PYTEST_PARALLEL)

# The same suite on Python 3.13, the runtime Lambda runs (template.yaml Globals): pyenv's 3.13.0 in
# its own venv. Missing, it fails (never skips): `pyenv install 3.13.0`.
PY313_VERSION ?= 3.13.0
PY313 = $(shell PYENV_VERSION=$(PY313_VERSION) pyenv which python3.13 2>/dev/null)
VENV313 := .venv-3.13
STAMP313 := $(VENV313)/.installed

$(STAMP313): pyproject.toml shared/requirements.txt
	@test -n "$(PY313)" || { echo "Python 3.13 ($(PY313_VERSION)) not found through pyenv: pyenv install $(PY313_VERSION)" >&2; exit 1; }
	@test -x $(VENV313)/bin/python || $(PY313) -m venv $(VENV313)
	$(VENV313)/bin/python -m pip install --quiet --upgrade pip
	$(VENV313)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP313)

test-3.13: $(STAMP313)
	PYTHONDONTWRITEBYTECODE= $(VENV313)/bin/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# The layer as SAM's makefile build makes it, bytecode by Python 3.13, for this machine's platform
# (the one step that fetches packages), then a slot run end to end from it alone
# (tests/layer/check_layer.py: moto and the downstream on loopback, the functions in a subprocess
# that sees only the layer).
LAYER_HOST := build/layer-host
layer: $(STAMP313)
	rm -rf $(LAYER_HOST)
	$(MAKE) --no-print-directory -C shared build-CoreLayer PYTHON=$(abspath $(VENV313))/bin/python PIP_PLATFORM= ARTIFACTS_DIR=$(abspath $(LAYER_HOST))

layer-check: $(STAMP)
	$(PY) tests/layer/check_layer.py $(LAYER_HOST)/python $(abspath $(VENV313))/bin/python

# The reservation protocol (docs/explanation/reservations.md) explored state by state
# (tests/protocol/check_protocol.py), then each rule it replaced, which it must find wrong.
check-protocol: $(STAMP)
	$(PY) tests/protocol/check_protocol.py
	$(PY) tests/protocol/check_protocol.py --old-rules

# The same run, then the CPU of every large test and of every test near a small test's budget.
test-size: $(STAMP)
	$(PYTEST_PARALLEL) -q --size-report

# The operator page in headless Chromium (Debian's /usr/bin/chromium, driven over the DevTools pipe):
# log in, open the occurrence list and one occurrence; fails on a console error or a missing table.
ui-check: $(STAMP)
	$(PY) tests/browser/ui_check.py

# One clean report of what a delivered cell costs (bench/report.py), also written as
# JSON to bench/report.json for comparison between runs.
bench: $(STAMP)
	$(PY) bench/report.py

# The compute a cell costs, measured over a long run (bench/load.py): CELLS cells of
# 10-target slots through the real handlers on the in-memory twins, each function's own CPU; writes
# bench/load.json, which make bench then reads. 100,000 cells take about an hour on a loaded 2-core box.
CELLS ?= 100000
load: $(STAMP)
	$(PY) bench/load.py --cells $(CELLS)

# The HTTP fuzz at length (tests/e2e/operator/test_http_fuzz.py; make test runs its first 1,000 examples):
# FUZZ generated requests through both HTTP functions, PIXIVFLOW_FUZZ_SEED=n for other examples.
FUZZ ?= 10000
fuzz: $(STAMP)
	PIXIVFLOW_FUZZ_EXAMPLES=$(FUZZ) $(PY) -m pytest -q -s tests/e2e/operator/test_http_fuzz.py

# The concurrent deterministic simulation on the in-memory twins (tests/simulation/sim.py, world.py,
# baton.py): SEEDS=10000 by default on both cores, SEED=n replays one seed with its trace.
SEEDS ?= 10000
sim: $(STAMP)
	$(PY) tests/simulation/sim.py $(if $(SEED),--seed $(SEED),--seeds $(SEEDS))

# Proof that the proof works: every mutant of tests/mutants.d/*.toml applied to a private
# copy of the tree, killed by its listed tests or a 100-seed make sim; ONLY=id,id runs a few.
mutants: $(STAMP)
	$(PY) tests/mutants/run.py $(if $(ONLY),--only $(ONLY))

# The OpenAPI document measured against the server it describes (tests/schemathesis/run.py): a dev
# server on a free port, then schemathesis with every check, 200 examples per operation and a fixed
# seed, once per token, once with a wrong token and once with none. Schemathesis is a measuring tool
# in its own venv, never part of make test. ST_EXAMPLES=n changes the examples, ST_ONLY="jobs wrong" some of the runs.
ST_VENV := .venv-st
ST_EXAMPLES ?= 200
$(ST_VENV)/.installed:
	@test -x $(ST_VENV)/bin/python || $(PYTHON) -m venv $(ST_VENV)
	$(ST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ST_VENV)/bin/python -m pip install --quiet 'schemathesis==4.32.5'
	@touch $(ST_VENV)/.installed

schemathesis: $(STAMP) $(ST_VENV)/.installed
	$(PY) tests/schemathesis/run.py --schemathesis $(ST_VENV)/bin/schemathesis --examples $(ST_EXAMPLES) $(foreach run,$(ST_ONLY),--only $(run))

$(LINT_VENV)/.installed:
	@test -x $(LINT_VENV)/bin/python || $(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LINT_VENV)/bin/python -m pip install --quiet 'cfn-lint==1.53.3' aws-sam-translator 'ruff==0.17.6' 'checkov==3.3.30'
	@touch $(LINT_VENV)/.installed

# cfn-lint >= 1.54 silently passes a bad Runtime or a misspelled FunctionResponseTypes
# (seen with 1.54): keep it pinned, with aws-sam-translator beside it.
# mypy runs from the project venv, where the libraries it reads types from are installed;
# its settings (strict on domain/, ports.py, services/) are [tool.mypy] in pyproject.toml.
# checkov (least privilege): the template's IAM and resource checks; every suppression is
# a `checkov:skip=<id>:<why>` comment on its resource in template.yaml.
lint: $(LINT_VENV)/.installed $(STAMP)
	$(LINT_VENV)/bin/cfn-lint template.yaml
	$(LINT_VENV)/bin/ruff check --no-cache shared functions tests bench
	$(PY) -m mypy
	$(LINT_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation --file template.yaml

clean:
	rm -rf $(VENV) $(VENV313) $(LINT_VENV) $(ST_VENV) .mypy_cache build/layer-host build/schemathesis
