# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Java 17+ must be on PATH for the Spark parts (it is not installed by make).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint install tools clean check-java

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml setup.py $(wildcard src/kafkalog/records/*.c src/kafkalog/records/*.h) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[spark,demo,test]'
	touch $(STAMP)

install: $(STAMP)

# kcat (librdkafka's command-line client) is one of the clients the broker tests run: Debian's package.
tools:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -qq kcat >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq kcat; } \
	      || echo "could not install kcat: the kcat tests will fail (apt-get install kcat)"; \
	  else echo "kcat is needed by the broker tests: sudo apt-get install kcat"; fi; }

check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Java 17+ is required for the Spark parts: apt-get install -y openjdk-17-jre-headless"; exit 1; }

demo: install check-java
	$(BIN)/kafkalog demo

test: install tools check-java
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy src
	$(BIN)/python -m pytest -q
	@echo "== again on the pure-Python record walk (what runs where the C extension cannot be built)"
	KAFKALOG_PURE_PYTHON=1 $(BIN)/python -m pytest -q tests/records tests/storage tests/test_cli*.py

bench: install check-java
	$(BIN)/python benchmarks/run.py

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy src

clean:
	rm -rf $(VENV) build dist .pytest_cache demo-data
