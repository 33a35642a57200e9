# The two commands a newcomer needs: `make demo` (no server to install) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
# The suite starts hundreds of Python processes (workers, holders, servers' clients): let
# them keep the package's compiled bytecode (__pycache__, ignored by git) even where the
# environment says PYTHONDONTWRITEBYTECODE, instead of each compiling it again
unexport PYTHONDONTWRITEBYTECODE
SOURCES := fencing migrations tests examples benchmarks
# mypy and the docs build (some 30 s of CPU, no timing in them) run at a lower priority:
# beside the suite in `make test` they take the CPU its workers leave while they wait,
# instead of slowing the suite, whose length is the run's
LOWER := nice -n 10

.PHONY: demo test suite lint docs bench peer

demo:
	bash scripts/setup-test-env.sh demo
	$(VENV)/bin/fencing demo $(ARGS)

# What CI runs (.ci/run): the setup, then side by side the checks of `lint`, the docs
# site, the whole suite (`suite`) and redis-py's own lock tests against FencedLock and
# fencing.aio.FencedLock (`peer`); each one's output is printed whole once it ends, and
# any failure fails the run. The suite runs on 5 pytest-xdist workers: its tests mostly
# wait (for leases to expire, servers to fail over, processes to pause), so 5 fit on 2
# CPUs, and the other three fill what CPU the waiting leaves (measured on 2026-11-28: 4
# workers 4m08, 5 workers 3m49, 6 workers 4m21-4m30, the sixth adding more than a minute
# of CPU). The budget is 4 minutes wall
# for all of `make test` from a fresh clone on a 2-vCPU machine, green also beside other
# work (docs/testing.md).
# From a fresh clone, the package's and the tests' bytecode is compiled first, once (0.5 s
# of CPU): the 5 workers, which start at once, otherwise each compiled it (3 s of CPU in
# all, measured; pytest still rewrites the test modules' asserts on each worker).
test:
	bash scripts/setup-test-env.sh
	$(PY) -m compileall -q fencing migrations tests examples
	$(MAKE) --no-print-directory -j 4 --output-sync=target lint docs suite peer

suite:
	$(PY) -m pytest -q -n 5 --dist loadgroup

# redis-py's lock tests, from its release's sdist on PyPI (network), on a throwaway server.
peer:
	bash scripts/peer-suite.sh

# ruff, mypy --strict (package, migrations, tests, examples, benchmarks: [tool.mypy]) and the
# import layering (import-linter contracts in pyproject.toml).
lint:
	$(PY) -m ruff check $(SOURCES)
	$(PY) -m ruff format --check $(SOURCES)
	$(LOWER) $(PY) -m mypy
	$(VENV)/bin/lint-imports

# The documentation site (mkdocs.yml) into site/; --strict: a dead link, a missing page
# or a broken API reference fails the build.
docs:
	NO_MKDOCS_2_WARNING=1 $(LOWER) $(VENV)/bin/mkdocs build --strict --quiet

bench:
	bash scripts/setup-test-env.sh
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run.py $(ARGS)
