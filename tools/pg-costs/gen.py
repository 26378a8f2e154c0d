#!/usr/bin/env python3
"""Writes a single-user-mode SQL script for one workload and run length.
usage: gen.py KIND N  (KIND: S B N NS NI I T A AL AS)
  S: pgbench -S, one autocommit EXECUTE per transaction     B: BEGIN; END;
  N: -N (simple-update): BEGIN; ua; s; i; END;              NS: N without the SELECT
  NI: N without the INSERT   I: BEGIN; i; END;               T: tpcb-like
  A: N advisory xact locks on distinct keys in one transaction (main lock table, LockReleaseAll)
  AL: N re-acquisitions of one advisory xact lock (LockAcquire's backend-local path only)
  AS: N session advisory locks on distinct keys, then N pg_advisory_unlock (LockRelease, main table)
  L: BEGIN; LOCK TABLE pgbench_branches IN SHARE MODE; END; (a strong lock: fast-path transfer)
  WS, WL: N autocommit INSERTs of a 100-byte or 1900-byte uncompressed text row (WAL copy per byte)"""
import random, sys

kind, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(12345)
naccounts, ntellers, nbranches = 100000, 10, 1  # scale 1
out = []
w = out.append
# pgbench's built-in scripts' statements as prepared statements (-M prepared)
w("PREPARE s(int) AS SELECT abalance FROM pgbench_accounts WHERE aid = $1;")
w("PREPARE ua(int,int) AS UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;")
w("PREPARE ut(int,int) AS UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;")
w("PREPARE ub(int,int) AS UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;")
w("PREPARE i(int,int,int,int) AS INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);")
# the tables and indexes in shared buffers first, as in a running pgbench
w("CREATE EXTENSION IF NOT EXISTS pg_prewarm;")
for rel in ("pgbench_accounts", "pgbench_accounts_pkey", "pgbench_tellers", "pgbench_tellers_pkey",
            "pgbench_branches", "pgbench_branches_pkey", "pgbench_history"):
    w(f"SELECT pg_prewarm('{rel}');")
w("SELECT pg_current_wal_insert_lsn();")
if kind == "A":
    # heavyweight locks on the main lock table (advisory locks never take the fast path)
    w("BEGIN;")
    w(f"SELECT count(pg_advisory_xact_lock(i)) FROM generate_series(1,{n}) i;")
    w("END;")
elif kind == "AL":
    w("BEGIN;")
    w(f"SELECT count(pg_advisory_xact_lock(1)) FROM generate_series(1,{n}) i;")
    w("END;")
elif kind in ("WS", "WL"):
    size = 100 if kind == "WS" else 1900
    w("CREATE TABLE walw (t text) WITH (autovacuum_enabled = off);")
    w("ALTER TABLE walw ALTER COLUMN t SET STORAGE PLAIN;")
    for _ in range(n):
        w(f"INSERT INTO walw VALUES (repeat('x', {size}));")
elif kind == "AS":
    w(f"SELECT count(pg_advisory_lock(i)) FROM generate_series(1,{n}) i;")
    w(f"SELECT count(pg_advisory_unlock(i)) FROM generate_series(1,{n}) i;")
else:
    for _ in range(n):
        aid = rnd.randint(1, naccounts); bid = rnd.randint(1, nbranches)
        tid = rnd.randint(1, ntellers); delta = rnd.randint(-5000, 5000)
        S = f"EXECUTE s({aid});"
        UA = f"EXECUTE ua({delta},{aid});"
        UT = f"EXECUTE ut({delta},{tid});"
        UB = f"EXECUTE ub({delta},{bid});"
        I = f"EXECUTE i({tid},{bid},{aid},{delta});"
        body = {"S": [S], "B": [], "L": ["LOCK TABLE pgbench_branches IN SHARE MODE;"], "N": [UA, S, I], "NS": [UA, I], "NI": [UA, S],
                "I": [I], "T": [UA, S, UT, UB, I]}[kind]
        if kind == "S":
            w(S)  # -S: one autocommit statement per transaction
        else:
            w("BEGIN;"); out.extend(body); w("END;")
w("SELECT pg_current_wal_insert_lsn();")
print("\n".join(out))
