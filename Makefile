# The two commands a newcomer needs: `make demo` (no server to install) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
SOURCES := fencing migrations tests examples benchmarks

.PHONY: demo test lint docs bench peer

demo:
	bash scripts/setup-test-env.sh demo
	$(VENV)/bin/fencing demo $(ARGS)

# What CI runs (.ci/run): the checks of `lint`, the docs site, the whole suite, then
# redis-py's own lock tests against FencedLock and fencing.aio.FencedLock (`peer`).
# The suite runs on 6 pytest-xdist workers: its tests mostly wait (for leases to expire,
# servers to fail over, processes to pause), so 6 fit on 2 CPUs; the budget is 5 minutes
# wall for all of `make test` on a 2-vCPU machine (docs/testing.md).
test:
	bash scripts/setup-test-env.sh
	$(MAKE) lint
	$(MAKE) docs
	$(PY) -m pytest -q -n 6 --dist loadgroup
	$(MAKE) peer

# redis-py's lock tests, from its release's sdist on PyPI (network), on a throwaway server.
peer:
	bash scripts/peer-suite.sh

# ruff, mypy --strict (package, migrations, tests, examples, benchmarks: [tool.mypy]) and the
# import layering (import-linter contracts in pyproject.toml).
lint:
	$(PY) -m ruff check $(SOURCES)
	$(PY) -m ruff format --check $(SOURCES)
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# The documentation site (mkdocs.yml) into site/; --strict: a dead link, a missing page
# or a broken API reference fails the build.
docs:
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

bench:
	bash scripts/setup-test-env.sh
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run.py $(ARGS)
