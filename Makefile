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

.PHONY: demo test lint jars venv broker bench clean

demo: jars
	$(BIN)/replicator demo

test: jars
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check cdc projections replay tests bench
	$(BIN)/mypy

jars: venv
	$(BIN)/replicator jars

broker: jars
	$(BIN)/replicator broker

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/bootstrap-system.sh
	scripts/bootstrap-system.sh postgresql
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
