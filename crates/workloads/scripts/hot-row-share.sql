-- The companion of hot-row.sql: reads one of the same four accounts FOR SHARE and holds the
-- lock to the end of its transaction, so that several readers share the row in a MultiXact
-- and hot-row.sql's FOR UPDATE waits on all of them.
\set aid random(1, 4)
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid FOR SHARE;
SELECT bbalance FROM pgbench_branches WHERE bid = 1;
END;
