# The two commands a newcomer needs: `make demo` (no server to install) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench

demo:
	bash scripts/setup-test-env.sh demo
	$(VENV)/bin/fencing demo $(ARGS)

test:
	bash scripts/setup-test-env.sh
	$(PY) -m ruff check fencing tests examples benchmarks
	$(PY) -m ruff format --check fencing tests examples benchmarks
	$(PY) -m mypy
	$(PY) -m pytest -q

bench:
	bash scripts/setup-test-env.sh
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run.py $(ARGS)

lint:
	$(PY) -m ruff check fencing tests examples benchmarks
	$(PY) -m mypy
