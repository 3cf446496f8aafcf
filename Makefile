# Two commands: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install test test-fast test-slow test-cluster soak lint demo bench bench-operators bench-nexmark bench-burst clean config-docs docs

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,broker,registry,dev,service,postgres,docs,bench]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# the class archive that starts Spark's JVM ~2 s faster (made once per Java and Spark version)
install: $(STAMP)
	$(PY) -m streamtable.cli jvm-archive --if-missing || echo "no class archive: Spark starts without it"

# the tests without Spark in two processes (pytest-xdist), then the Spark tests in one
test: install
	$(PY) -m pytest -q -m "not spark and not slow" -n 2
	$(PY) -m pytest -q -m "spark and not slow"

test-fast: install
	$(PY) -m pytest -q -m "not spark and not slow"

# a real Spark standalone cluster (master, 2 workers sharing no disk) and a moto S3: needs root
test-cluster: install
	$(PY) -m pytest -q tests/cluster --run-cluster

# the tests marked slow outside the fault soak: kill -9 of stores of other formats, the JVM
# class archive's training run, the bench harnesses end to end (a few minutes)
test-slow: install
	$(PY) -m pytest -q -m slow --ignore=tests/faults

# faults that take minutes: the broker frozen for a minute mid-run, and kill -9 of the
# application SOAK_KILLS times in a row (prints kills, batches replayed, records checked,
# divergences)
SOAK_KILLS ?= 100
soak: install
	STREAMTABLE_SOAK_KILLS=$(SOAK_KILLS) $(PY) -m pytest -q -s -m slow tests/faults

# ruff, mypy, and the import contracts of pyproject.toml (the floors of the package)
lint: install
	$(PY) -m ruff check src tests
	$(PY) -m mypy src
	$(VENV)/bin/lint-imports

# docs/configuration.md is generated from the settings' definitions in src/streamtable/config.py
config-docs: install
	$(PY) -m streamtable.cli config > docs/configuration.md

# the documentation site (mkdocs + mkdocstrings) into site/; any warning is an error
docs: install
	$(PY) -m mkdocs build --strict

demo: install
	$(PY) -m examples.share_holders.demo $(ARGS)

bench: install
	$(PY) -m bench $(ARGS)

# every DSL operator family on the Spark runtime, measured and checked (bench/operators/)
bench-operators: install
	$(PY) -m bench.operators $(ARGS)

# the Nexmark queries on streamtable (and peers), measured and checked (bench/nexmark/)
bench-nexmark: install
	$(PY) -m bench.nexmark $(ARGS)

# memory and latency of word count live through a tenfold input burst (bench/burst.py);
# ARGS=--out bench/RESULTS.md appends its section there
bench-burst: install
	$(PY) -m bench.burst $(ARGS)

clean:
	rm -rf $(VENV) .streamtable .pytest_cache site
