"""The SQL issuers' statements as text for Django's cursors. GENERATED: do not edit.

Written by ``python -m fencing.sql._generate`` from ``fencing.sql``'s SQLAlchemy
constructs (``fencing/sql/_issuer_statements.py``), the one source of this SQL;
tests/test_django_sql.py fails when this file is not what they compile to now.

``STATEMENTS[vendor][name]`` (names: ``fencing._sql.flows.STATEMENTS``) is the statement's
steps, run in order in the flow's transaction, its reply the last one's (one step, but
on MySQL, which has no ``RETURNING``, an upsert and the read of what it wrote). A step
is the SQL with ``%s`` placeholders, the name of the value of each placeholder in
order, and the constants among them (values written in the construct, such as the
``1`` of ``token + 1``); the flow gives the others. ``CLOCK[vendor]`` is the database's
clock in seconds since the epoch, the one the leases' expiries are on.

Imports nothing.
"""

from __future__ import annotations

Step = tuple[str, tuple[str, ...], dict[str, object]]

STATEMENTS: dict[str, dict[str, tuple[Step, ...]]] = {
    "sqlite": {
        "acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) VALUES (%s, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT), %s, (CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) + %s)) ON CONFLICT (name) DO UPDATE SET token = max(fencing_leases.token + %s, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT)), holder = excluded.holder, expires_at = excluded.expires_at WHERE fencing_leases.holder IS NULL OR fencing_leases.expires_at <= CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) RETURNING token",
                ("fence", "julianday_'now'_-_2440587_5_*_86400_0_1", "holder_id", "ttl", "token_1", "julianday_'now'_-_2440587_5_*_86400_0_1",),
                {"julianday_'now'_-_2440587_5_*_86400_0_1": 1000000, "token_1": 1},
            ),
        ),
        "lease_left": (
            (
                "SELECT fencing_leases.expires_at - CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "renew": (
            (
                "UPDATE fencing_leases SET expires_at=(CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) + %s) WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("ttl", "fence", "lease_token", "holder_id",),
                {},
            ),
        ),
        "release": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "status": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "status_locked": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "names": (
            (
                "SELECT fencing_leases.name \nFROM fencing_leases \nWHERE (fencing_leases.name LIKE %s || '%%' ESCAPE '/') ORDER BY fencing_leases.name",
                ("prefix",),
                {},
            ),
        ),
        "clear": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "slot_lock": (
            (
                "SELECT 1",
                (),
                {},
            ),
        ),
        "slot_acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) SELECT %s AS anon_1, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT) AS anon_2, %s AS anon_3, CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) + %s AS anon_4 \nWHERE (SELECT count(*) AS count_1 \nFROM fencing_leases \nWHERE fencing_leases.name >= %s AND fencing_leases.name < %s AND (substr(fencing_leases.name, length(%s) + %s) NOT GLOB %s) AND fencing_leases.name != %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)) < %s ON CONFLICT (name) DO UPDATE SET token = max(fencing_leases.token + %s, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT)), holder = excluded.holder, expires_at = excluded.expires_at WHERE fencing_leases.holder IS NULL OR fencing_leases.expires_at <= CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) RETURNING token",
                ("fence", "julianday_'now'_-_2440587_5_*_86400_0_1", "holder_id", "ttl", "first", "after", "group", "length_1", "substr_1", "fence", "permits", "token_1", "julianday_'now'_-_2440587_5_*_86400_0_2",),
                {"julianday_'now'_-_2440587_5_*_86400_0_1": 1000000, "length_1": 1, "substr_1": "*[^0-9]*", "token_1": 1, "julianday_'now'_-_2440587_5_*_86400_0_2": 1000000},
            ),
        ),
        "slot_left": (
            (
                "SELECT fencing_leases.expires_at - CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("fence",),
                {},
            ),
        ),
        "admit_lock": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT)) ON CONFLICT (name, kind, seq) DO UPDATE SET at = CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT) RETURNING at",
                ("limiter", "window", "seq", "julianday_'now'_-_2440587_5_*_86400_0_1", "julianday_'now'_-_2440587_5_*_86400_0_1",),
                {"seq": 0, "julianday_'now'_-_2440587_5_*_86400_0_1": 1000000},
            ),
        ),
        "admit_expire": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at <= %s",
                ("limiter", "window", "seq_1", "before",),
                {"seq_1": 0},
            ),
        ),
        "admit_window": (
            (
                "SELECT min(fencing_admissions.at) AS min_1, count(*) AS count_1, max(fencing_admissions.seq) AS max_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_reset": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_insert": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, %s)",
                ("limiter", "window", "seq_no", "admitted_at",),
                {},
            ),
        ),
        "admit_oldest": (
            (
                "SELECT fencing_admissions.at \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s ORDER BY fencing_admissions.at, fencing_admissions.seq\n LIMIT 1 OFFSET %s",
                ("limiter", "window", "seq_1", "skip",),
                {"seq_1": 0},
            ),
        ),
        "clock": (
            (
                "SELECT CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT) AS anon_1",
                ("julianday_'now'_-_2440587_5_*_86400_0_1",),
                {"julianday_'now'_-_2440587_5_*_86400_0_1": 1000000},
            ),
        ),
        "limit_use": (
            (
                "SELECT count(*) AS count_1, min(fencing_admissions.at) AS min_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at > %s",
                ("limiter", "window", "seq_1", "after",),
                {"seq_1": 0},
            ),
        ),
        "rw_touch": (
            (
                "INSERT INTO fencing_leases (name) VALUES (%s) ON CONFLICT DO NOTHING",
                ("fence",),
                {},
            ),
        ),
        "rw_lock": (
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "rw_expire": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.expires_at <= CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("fence",),
                {},
            ),
        ),
        "rw_rows": (
            (
                "SELECT fencing_rw_leases.holder, fencing_rw_leases.mode, fencing_rw_leases.token, fencing_rw_leases.expires_at - CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) AS anon_1 \nFROM fencing_rw_leases \nWHERE fencing_rw_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "rw_next": (
            (
                "UPDATE fencing_leases SET token=max(fencing_leases.token + %s, CAST(((julianday('now') - 2440587.5) * 86400.0) * %s AS BIGINT)) WHERE fencing_leases.name = %s RETURNING token",
                ("token_1", "julianday_'now'_-_2440587_5_*_86400_0_1", "fence",),
                {"token_1": 1, "julianday_'now'_-_2440587_5_*_86400_0_1": 1000000},
            ),
        ),
        "rw_insert": (
            (
                "INSERT INTO fencing_rw_leases (name, holder, mode, token, expires_at) VALUES (%s, %s, %s, %s, (CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) + %s))",
                ("fence", "holder_id", "rw_mode", "lease_token", "ttl",),
                {},
            ),
        ),
        "rw_drop": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s",
                ("fence", "holder_id",),
                {},
            ),
        ),
        "rw_renew": (
            (
                "UPDATE fencing_rw_leases SET expires_at=(CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE) + %s) WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("ttl", "fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
        "rw_release": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
                ("fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
    },
    "postgresql": {
        "acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) VALUES (%s, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT), %s, (CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) + %s)) ON CONFLICT (name) DO UPDATE SET token = greatest(fencing_leases.token + %s, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT)), holder = excluded.holder, expires_at = excluded.expires_at WHERE fencing_leases.holder IS NULL OR fencing_leases.expires_at <= CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) RETURNING fencing_leases.token",
                ("fence", "param_1", "holder_id", "ttl", "token_1", "param_1",),
                {"param_1": 1000000, "token_1": 1},
            ),
        ),
        "lease_left": (
            (
                "SELECT fencing_leases.expires_at - CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "renew": (
            (
                "UPDATE fencing_leases SET expires_at=(CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) + %s) WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("ttl", "fence", "lease_token", "holder_id",),
                {},
            ),
        ),
        "release": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "status": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "status_locked": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s FOR UPDATE",
                ("fence",),
                {},
            ),
        ),
        "names": (
            (
                "SELECT fencing_leases.name \nFROM fencing_leases \nWHERE (fencing_leases.name LIKE %s || '%%' ESCAPE '/') ORDER BY fencing_leases.name",
                ("prefix",),
                {},
            ),
        ),
        "clear": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "slot_lock": (
            (
                "SELECT pg_advisory_xact_lock(k1, k2) FROM (SELECT ('x' || substr(encode(sha256(convert_to(%s, 'UTF8')), 'hex'), 1, 8))::bit(32)::int4 AS k1, ('x' || substr(encode(sha256(convert_to(%s, 'UTF8')), 'hex'), 9, 8))::bit(32)::int4 AS k2) AS keys",
                ("group", "group",),
                {},
            ),
        ),
        "slot_acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) SELECT %s AS anon_1, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT) AS floor_1, %s AS anon_2, CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) + %s AS anon_3 \nWHERE (SELECT count(*) AS count_1 \nFROM fencing_leases \nWHERE (fencing_leases.name ~>=~ %s) AND (fencing_leases.name ~<~ %s) AND (substr(fencing_leases.name, length(%s) + %s) ~ %s) AND fencing_leases.name != %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)) < %s ON CONFLICT (name) DO UPDATE SET token = greatest(fencing_leases.token + %s, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT)), holder = excluded.holder, expires_at = excluded.expires_at WHERE fencing_leases.holder IS NULL OR fencing_leases.expires_at <= CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) RETURNING fencing_leases.token",
                ("fence", "param_1", "holder_id", "ttl", "first", "after", "group", "length_1", "substr_1", "fence", "permits", "token_1", "param_2",),
                {"param_1": 1000000, "length_1": 1, "substr_1": "^[0-9]+$", "token_1": 1, "param_2": 1000000},
            ),
        ),
        "slot_left": (
            (
                "SELECT fencing_leases.expires_at - CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("fence",),
                {},
            ),
        ),
        "admit_lock": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT)) ON CONFLICT (name, kind, seq) DO UPDATE SET at = CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT) RETURNING fencing_admissions.at",
                ("limiter", "window", "seq", "param_1", "param_1",),
                {"seq": 0, "param_1": 1000000},
            ),
        ),
        "admit_expire": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at <= %s",
                ("limiter", "window", "seq_1", "before",),
                {"seq_1": 0},
            ),
        ),
        "admit_window": (
            (
                "SELECT min(fencing_admissions.at) AS min_1, count(*) AS count_1, max(fencing_admissions.seq) AS max_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_reset": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_insert": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, %s)",
                ("limiter", "window", "seq_no", "admitted_at",),
                {},
            ),
        ),
        "admit_oldest": (
            (
                "SELECT fencing_admissions.at \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s ORDER BY fencing_admissions.at, fencing_admissions.seq \n LIMIT 1 OFFSET %s",
                ("limiter", "window", "seq_1", "skip",),
                {"seq_1": 0},
            ),
        ),
        "clock": (
            (
                "SELECT CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT) AS floor_1",
                ("param_1",),
                {"param_1": 1000000},
            ),
        ),
        "limit_use": (
            (
                "SELECT count(*) AS count_1, min(fencing_admissions.at) AS min_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at > %s",
                ("limiter", "window", "seq_1", "after",),
                {"seq_1": 0},
            ),
        ),
        "rw_touch": (
            (
                "INSERT INTO fencing_leases (name) VALUES (%s) ON CONFLICT DO NOTHING",
                ("fence",),
                {},
            ),
        ),
        "rw_lock": (
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s FOR UPDATE",
                ("fence",),
                {},
            ),
        ),
        "rw_expire": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.expires_at <= CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("fence",),
                {},
            ),
        ),
        "rw_rows": (
            (
                "SELECT fencing_rw_leases.holder, fencing_rw_leases.mode, fencing_rw_leases.token, fencing_rw_leases.expires_at - CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) AS anon_1 \nFROM fencing_rw_leases \nWHERE fencing_rw_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "rw_next": (
            (
                "UPDATE fencing_leases SET token=greatest(fencing_leases.token + %s, CAST(floor(EXTRACT(epoch FROM clock_timestamp()) * %s) AS BIGINT)) WHERE fencing_leases.name = %s RETURNING fencing_leases.token",
                ("token_1", "param_1", "fence",),
                {"token_1": 1, "param_1": 1000000},
            ),
        ),
        "rw_insert": (
            (
                "INSERT INTO fencing_rw_leases (name, holder, mode, token, expires_at) VALUES (%s, %s, %s, %s, (CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) + %s))",
                ("fence", "holder_id", "rw_mode", "lease_token", "ttl",),
                {},
            ),
        ),
        "rw_drop": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s",
                ("fence", "holder_id",),
                {},
            ),
        ),
        "rw_renew": (
            (
                "UPDATE fencing_rw_leases SET expires_at=(CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION) + %s) WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("ttl", "fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
        "rw_release": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
                ("fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
    },
    "mysql": {
        "acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) VALUES (%s, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), %s, ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s)) ON DUPLICATE KEY UPDATE token = if(fencing_leases.holder IS NULL OR fencing_leases.expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0), greatest(fencing_leases.token + %s, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))), fencing_leases.token), holder = if(fencing_leases.holder IS NULL OR fencing_leases.expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0), %s, fencing_leases.holder), expires_at = if(fencing_leases.holder = %s, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s, fencing_leases.expires_at)",
                ("fence", "holder_id", "ttl", "token_1", "holder_id", "holder_id", "ttl",),
                {"token_1": 1},
            ),
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s AND fencing_leases.holder = %s",
                ("fence", "holder_id",),
                {},
            ),
        ),
        "lease_left": (
            (
                "SELECT fencing_leases.expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "renew": (
            (
                "UPDATE fencing_leases SET expires_at=((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s) WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("ttl", "fence", "lease_token", "holder_id",),
                {},
            ),
        ),
        "release": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "status": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "status_locked": (
            (
                "SELECT fencing_leases.token, fencing_leases.holder, fencing_leases.expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_1, fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_2 \nFROM fencing_leases \nWHERE fencing_leases.name = %s FOR UPDATE",
                ("fence",),
                {},
            ),
        ),
        "names": (
            (
                "SELECT fencing_leases.name \nFROM fencing_leases \nWHERE (fencing_leases.name LIKE concat(%s, '%%') ESCAPE '/') ORDER BY fencing_leases.name",
                ("prefix",),
                {},
            ),
        ),
        "clear": (
            (
                "UPDATE fencing_leases SET holder=%s, expires_at=%s WHERE fencing_leases.name = %s AND fencing_leases.token = %s AND fencing_leases.holder = %s",
                ("holder", "expires_at", "fence", "lease_token", "holder_id",),
                {"holder": None, "expires_at": None},
            ),
        ),
        "slot_lock": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, 'slots', %s, %s) ON DUPLICATE KEY UPDATE at = fencing_admissions.at",
                ("group", "seq", "at",),
                {"seq": 0, "at": 0},
            ),
        ),
        "slot_acquire": (
            (
                "INSERT INTO fencing_leases (name, token, holder, expires_at) SELECT %s AS anon_1, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), %s AS anon_2, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s AS anon_3 FROM DUAL \nWHERE (SELECT count(*) AS count_1 \nFROM fencing_leases \nWHERE fencing_leases.name >= %s AND fencing_leases.name < %s AND substr(fencing_leases.name, char_length(%s) + %s) REGEXP %s AND fencing_leases.name != %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)) < %s ON DUPLICATE KEY UPDATE token = if(fencing_leases.holder IS NULL OR fencing_leases.expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0), greatest(fencing_leases.token + %s, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))), fencing_leases.token), holder = if(fencing_leases.holder IS NULL OR fencing_leases.expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0), %s, fencing_leases.holder), expires_at = if(fencing_leases.holder = %s, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s, fencing_leases.expires_at)",
                ("fence", "holder_id", "ttl", "first", "after", "group", "char_length_1", "substr_1", "fence", "permits", "token_1", "holder_id", "holder_id", "ttl",),
                {"char_length_1": 1, "substr_1": "^[0-9]+$", "token_1": 1},
            ),
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s AND fencing_leases.holder = %s",
                ("fence", "holder_id",),
                {},
            ),
        ),
        "slot_left": (
            (
                "SELECT fencing_leases.expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_1 \nFROM fencing_leases \nWHERE fencing_leases.name = %s AND fencing_leases.holder IS NOT NULL AND fencing_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("fence",),
                {},
            ),
        ),
        "admit_lock": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))) ON DUPLICATE KEY UPDATE at = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
                ("limiter", "window", "seq",),
                {"seq": 0},
            ),
            (
                "SELECT fencing_admissions.at \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq = %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_expire": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at <= %s",
                ("limiter", "window", "seq_1", "before",),
                {"seq_1": 0},
            ),
        ),
        "admit_window": (
            (
                "SELECT min(fencing_admissions.at) AS min_1, count(*) AS count_1, max(fencing_admissions.seq) AS max_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_reset": (
            (
                "DELETE FROM fencing_admissions WHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s",
                ("limiter", "window", "seq_1",),
                {"seq_1": 0},
            ),
        ),
        "admit_insert": (
            (
                "INSERT INTO fencing_admissions (name, kind, seq, at) VALUES (%s, %s, %s, %s)",
                ("limiter", "window", "seq_no", "admitted_at",),
                {},
            ),
        ),
        "admit_oldest": (
            (
                "SELECT fencing_admissions.at \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s ORDER BY fencing_admissions.at, fencing_admissions.seq \n LIMIT %s, 1",
                ("limiter", "window", "seq_1", "skip",),
                {"seq_1": 0},
            ),
        ),
        "clock": (
            (
                "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
                (),
                {},
            ),
        ),
        "limit_use": (
            (
                "SELECT count(*) AS count_1, min(fencing_admissions.at) AS min_1 \nFROM fencing_admissions \nWHERE fencing_admissions.name = %s AND fencing_admissions.kind = %s AND fencing_admissions.seq > %s AND fencing_admissions.at > %s",
                ("limiter", "window", "seq_1", "after",),
                {"seq_1": 0},
            ),
        ),
        "rw_touch": (
            (
                "INSERT INTO fencing_leases (name) VALUES (%s) ON DUPLICATE KEY UPDATE token = fencing_leases.token",
                ("fence",),
                {},
            ),
        ),
        "rw_lock": (
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s FOR UPDATE",
                ("fence",),
                {},
            ),
        ),
        "rw_expire": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.expires_at <= (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("fence",),
                {},
            ),
        ),
        "rw_rows": (
            (
                "SELECT fencing_rw_leases.holder, fencing_rw_leases.mode, fencing_rw_leases.token, fencing_rw_leases.expires_at - (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) AS anon_1 \nFROM fencing_rw_leases \nWHERE fencing_rw_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "rw_next": (
            (
                "UPDATE fencing_leases SET token=greatest(fencing_leases.token + %s, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))) WHERE fencing_leases.name = %s",
                ("token_1", "fence",),
                {"token_1": 1},
            ),
            (
                "SELECT fencing_leases.token \nFROM fencing_leases \nWHERE fencing_leases.name = %s",
                ("fence",),
                {},
            ),
        ),
        "rw_insert": (
            (
                "INSERT INTO fencing_rw_leases (name, holder, mode, token, expires_at) VALUES (%s, %s, %s, %s, ((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s))",
                ("fence", "holder_id", "rw_mode", "lease_token", "ttl",),
                {},
            ),
        ),
        "rw_drop": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s",
                ("fence", "holder_id",),
                {},
            ),
        ),
        "rw_renew": (
            (
                "UPDATE fencing_rw_leases SET expires_at=((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0) + %s) WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("ttl", "fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
        "rw_release": (
            (
                "DELETE FROM fencing_rw_leases WHERE fencing_rw_leases.name = %s AND fencing_rw_leases.holder = %s AND fencing_rw_leases.mode = %s AND fencing_rw_leases.token = %s AND fencing_rw_leases.expires_at > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
                ("fence", "holder_id", "rw_mode", "lease_token",),
                {},
            ),
        ),
    },
}

CLOCK: dict[str, str] = {
    "sqlite": "CAST(((julianday('now') - 2440587.5) * 86400.0) AS DOUBLE)",
    "postgresql": "CAST(EXTRACT(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)",
    "mysql": "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) / 1000000.0)",
}
