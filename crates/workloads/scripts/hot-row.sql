-- A hot-row transfer: every client locks one of four accounts FOR UPDATE, then updates it.
-- Run with a share-locking companion to add MultiXacts:
--   lockstack pgbench -c 16 -t 50 -f crates/workloads/scripts/hot-row.sql \
--     -f crates/workloads/scripts/hot-row-share.sql --machine xeon-32
\set aid random(1, 4)
\set delta random(-5000, 5000)
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid FOR UPDATE;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
END;
