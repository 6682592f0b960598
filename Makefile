# Every target installs what it needs: system packages (scripts/bootstrap-system.sh), the venv
# (.venv, from pyproject.toml) and the JVM jars (Maven Central into .cache/jars).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TEST_WORKERS ?= 2
# Two workers (pytest-xdist), each module on one of them: the suite mostly waits on Spark jobs,
# brokers and processes; the controller starts one Kafka broker for both, each worker one
# SparkSession. TEST_WORKERS=0 runs the suite in this process.
PYTEST_ARGS ?= -n $(TEST_WORKERS) --dist loadfile

.PHONY: demo test lint jars venv compiled pure broker bench clean

# The processor's hot path, compiled with mypyc (cdc/compiled.py lists it); CDC_PURE_PYTHON=1
# removes the compiled modules instead, so the same sources run as plain Python.
HOT_PATH := $(shell sed -n 's/^    "\([a-z_/]*\.\(py\|c\)\)",$$/\1/p' cdc/compiled.py)
COMPILED := $(VENV)/.compiled
SYSTEM_NEEDS := postgresql compiler
ifeq ($(CDC_PURE_PYTHON),1)
COMPILED := pure
SYSTEM_NEEDS := postgresql
endif

demo: jars
	$(BIN)/replicator demo

test: jars
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check cdc projections replay tests bench
	$(BIN)/mypy

jars: venv $(COMPILED)
	$(BIN)/replicator jars

broker: jars
	$(BIN)/replicator broker

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/bootstrap-system.sh
	scripts/bootstrap-system.sh $(SYSTEM_NEEDS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

compiled: $(VENV)/.compiled

$(VENV)/.compiled: $(VENV)/.installed cdc/compiled.py scripts/compile_hot_path.py $(HOT_PATH)
	$(BIN)/python scripts/compile_hot_path.py
	touch $@

pure: venv
	$(BIN)/python scripts/compile_hot_path.py --clean
	rm -f $(VENV)/.compiled

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache build
	find cdc replay -name '*.so' -delete
