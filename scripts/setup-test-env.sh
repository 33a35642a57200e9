#!/usr/bin/env bash
# Prepare this machine: system packages when missing, then a virtual environment (.venv)
# with the package and its extras. Safe to run again; installs only what is missing.
#   scripts/setup-test-env.sh        everything the test suite needs: redis-server,
#                                    PostgreSQL and pgbouncer, MariaDB, etcd, ZooKeeper (it brings a
#                                    Java runtime; the tests start their own throwaway
#                                    servers), libfaketime (a Redis node's clock
#                                    moved in a test), and the development extras
#   scripts/setup-test-env.sh demo   only what `fencing demo` needs (no server)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-test}"

missing=()
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing+=(python3-venv python3-pip)
if [ "$mode" = test ]; then
    # also the Sentinels of the failover tests: they run `redis-server --sentinel` (Debian's
    # redis-server binary is the Sentinel too; the redis-sentinel package adds only a
    # service and a redis-sentinel link, so it is not needed)
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)  # redis-cli --cluster create
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
    command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
    # the advisory-lease tests behind a pooler (the tests start their own pgbouncer)
    [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || missing+=(pgbouncer)
    # the MySQL/MariaDB tests (they start their own throwaway mariadbd, never the service)
    [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # the etcd TLS test's CA
    [ -e /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
    # the Redlock test that runs one node an hour off (fencing.testing.servers.RedisServer's
    # faketime=): libfaketime, and glibc's malloc debug library preloaded before it
    compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || missing+=(faketime)
fi
if ((${#missing[@]})); then
    echo "installing system packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
extras=dev
[ "$mode" = test ] || extras=sql,plot
# uv (from PyPI, into the venv) installs the package and its extras in seconds, where pip
# takes most of a minute of the suite's budget. Without --compile-bytecode: compiling
# every installed module (Django, Celery, SQLAlchemy whole) took 14 s of the setup's 23,
# where the suite's processes compile the few they import (make test from a fresh clone,
# measured 2026-11-28: 4m07-4m15 with it, 3m52 without; CPU 5m56-6m08 -> 5m19)
.venv/bin/python -m pip install -q --disable-pip-version-check uv
.venv/bin/python -m uv pip install -q --python .venv/bin/python -e ".[$extras]"
