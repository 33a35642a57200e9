#!/usr/bin/env bash
# Prepare a machine for the test suite: system packages the tests start themselves
# (redis-server, PostgreSQL) when missing, then a virtual environment with the
# package and its development extras. Safe to run again; installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing+=(python3-venv python3-pip)
command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
if ((${#missing[@]})); then
    echo "installing system packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
# The suite starts its own throwaway servers; the distribution's services are not needed.

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
