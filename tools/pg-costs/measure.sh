#!/usr/bin/env bash
# Regenerates crates/sim/costs/pg15.toml's measured figures: PostgreSQL 15's instruction counts
# per lock-stack region, from callgrind runs of a scale-1 pgbench database.
# usage: tools/pg-costs/measure.sh [OUT.toml]   (default: print to stdout; summaries -> tools/pg-costs/data/)
# needs: postgresql-15 (/usr/lib/postgresql/15/bin), valgrind, python3. Run as root (drops to
# user postgres) or as a non-root user. Takes about 5-10 minutes on one core.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUT=${1:-}
DATA=${PGCOSTS_DATA:-$HERE/data}
SHORT=${PGCOSTS_SHORT:-200}
LONG=${PGCOSTS_LONG:-2000}
IDLE=${PGCOSTS_IDLE:-20}
W=$(mktemp -d /tmp/pgcosts.XXXXXX)
trap 'as_pg "$BIN/pg_ctl" -D "$W/run" stop -m immediate >/dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
if [ "$(id -u)" = 0 ]; then chown postgres "$W"; as_pg() { runuser -u postgres -- "$@"; }; else as_pg() { "$@"; }; fi
mkdir -p "$DATA"
[ -n "${PGCOSTS_ONLY:-}" ] || rm -f "$DATA"/*.funcs.json "$DATA"/*.inclusive.txt "$DATA"/*.lsn
START=$(date +%s)
# PGCOSTS_ONLY="PB PI" reruns just those passes (keeping the other summaries in $DATA)
want() { [ -z "${PGCOSTS_ONLY:-}" ] || [[ " $PGCOSTS_ONLY " == *" $1 "* ]]; }
log() { echo "[measure.sh $(date -u +%H:%M:%S)] $*" >&2; }

log "initdb + pgbench -i -s 1 in $W"
as_pg "$BIN/initdb" -D "$W/base" -A trust >/dev/null
PORT=$((54000 + RANDOM % 1000))
as_pg "$BIN/pg_ctl" -D "$W/base" -o "-k $W -p $PORT -c listen_addresses=''" -l "$W/base.log" -w start >/dev/null
as_pg "$BIN/pgbench" -h "$W" -p $PORT -i -s 1 -q postgres >/dev/null 2>&1
as_pg "$BIN/pg_ctl" -D "$W/base" -w stop -m fast >/dev/null

# One single-user pass: a fresh copy of the loaded cluster, the script on stdin, callgrind on.
single() { # KIND N [TAG-SUFFIX POSTGRES-OPTION...]
  local kind=$1 n=$2 tag=$1$2${3:-}; shift 2; if [ $# -gt 0 ]; then shift; fi
  want "$kind" || return 0
  rm -rf "$W/run"; as_pg cp -a "$W/base" "$W/run"
  python3 "$HERE/gen.py" "$kind" "$n" > "$W/$tag.sql"
  as_pg valgrind --tool=callgrind --callgrind-out-file="$W/$tag.cg" \
    "$BIN/postgres" --single -D "$W/run" -c fsync=off -c full_page_writes=off -c max_locks_per_transaction=256 "$@" postgres \
    < "$W/$tag.sql" > "$W/$tag.out" 2> "$W/$tag.err"
  grep -o 'pg_current_wal_insert_lsn = "[^"]*"' "$W/$tag.out" | sed 's/.*= "\(.*\)"/\1/' > "$W/$tag.lsn"
  summarize "$tag"
}
summarize() { # TAG: the parser's input (full caller/callee tree) and the committed top-200 summary
  local tag=$1
  callgrind_annotate --inclusive=yes --tree=both --threshold=100 "$W/$tag.cg" > "$W/$tag.tree" 2>/dev/null
  callgrind_annotate --inclusive=yes --threshold=100 "$W/$tag.cg" > "$W/$tag.incl" 2>/dev/null
  head -200 "$W/$tag.incl" > "$DATA/$tag.inclusive.txt"
  python3 "$HERE/parse.py" extract "$W/$tag.tree" > "$DATA/$tag.funcs.json"
  [ -f "$W/$tag.lsn" ] && cp "$W/$tag.lsn" "$DATA/$tag.lsn" || true
  log "$tag: $(grep -m1 'PROGRAM TOTALS' "$DATA/$tag.inclusive.txt")"
}

for k in S B N NS NI I T; do
  log "single-user $k: $SHORT and $LONG transactions"
  single $k $SHORT; single $k $LONG
done
for k in A AL AS; do
  log "single-user $k (advisory locks): $((SHORT * 5)) and $((LONG * 5)) locks"
  single $k $((SHORT * 5)); single $k $((LONG * 5))
done

log "single-user WS/WL: $LONG inserts of 100-byte and 1900-byte rows (WAL copy per byte)"
single WS $LONG; single WL $LONG

log "single-user L: a strong relation lock per transaction (fast-path transfer), max_connections 100 and 20"
single L $SHORT; single L $LONG
single L $SHORT m20 -c max_connections=20; single L $LONG m20 -c max_connections=20

# Snapshot slope: a server whose backends all run under callgrind; one pgbench -N client,
# with 0 or $IDLE extra idle sessions connected.
server() { # TAG NIDLE NTX SCRIPT
  local tag=$1 nidle=$2 ntx=$3 script=$4
  want "${tag%%[0-9]*}" || return 0
  rm -rf "$W/run" "$W/cg.$tag"; as_pg cp -a "$W/base" "$W/run"; as_pg mkdir "$W/cg.$tag"
  as_pg valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$W/cg.$tag/cg.%p" \
    "$BIN/postgres" -D "$W/run" -k "$W" -p $PORT -c listen_addresses='' -c fsync=off \
    -c full_page_writes=off -c autovacuum=off > "$W/srv.$tag.log" 2>&1 &
  local srv=$!
  for _ in $(seq 120); do as_pg "$BIN/pg_isready" -h "$W" -p $PORT -q && break; sleep 1; done
  local idlers=()
  for _ in $(seq "$nidle"); do
    (sleep 100000 | as_pg "$BIN/psql" -h "$W" -p $PORT -q postgres >/dev/null 2>&1) &
    idlers+=($!)
  done
  for _ in $(seq 300); do
    c=$(as_pg "$BIN/psql" -h "$W" -p $PORT -At -c "select count(*) from pg_stat_activity where backend_type='client backend'" postgres)
    [ "$c" -ge $((nidle + 1)) ] && break; sleep 1; done
  as_pg "$BIN/psql" -h "$W" -p $PORT -q -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" \
    -c "SELECT pg_prewarm(c) FROM unnest(array['pgbench_accounts','pgbench_accounts_pkey','pgbench_tellers','pgbench_tellers_pkey','pgbench_branches','pgbench_branches_pkey','pgbench_history']) c" postgres >/dev/null
  local sel=(-b "$script"); [ -f "$HERE/scripts/$script.sql" ] && sel=(-f "$HERE/scripts/$script.sql")
  as_pg "$BIN/pgbench" -h "$W" -p $PORT -n "${sel[@]}" -M prepared -c 1 -t "$ntx" postgres > "$W/pgbench.$tag.out" 2>&1
  grep -q "actually processed: $ntx/$ntx" "$W/pgbench.$tag.out" || { cat "$W/pgbench.$tag.out" >&2; exit 1; }
  as_pg "$BIN/pg_ctl" -D "$W/run" -w stop -m fast >/dev/null 2>&1 || true
  wait $srv 2>/dev/null || true
  for p in "${idlers[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  # the measured backend: the profile with the most CommitTransactionCommand calls (one per statement)
  local best; best=$(python3 "$HERE/parse.py" pick "$W/cg.$tag"/cg.*)
  cp "$best" "$W/$tag.cg"; summarize "$tag"
}
log "server, pgbench -M prepared -c 1: -S, -N, tpcb-like ($SHORT and $LONG transactions each)"
server PS$SHORT 0 $SHORT select-only; server PS$LONG 0 $LONG select-only
server PN$SHORT 0 $SHORT simple-update; server PN$LONG 0 $LONG simple-update
server PT$SHORT 0 $SHORT tpcb-like; server PT$LONG 0 $LONG tpcb-like
log "server, pgbench -M prepared -c 1, custom scripts (tools/pg-costs/scripts): each differs by one statement"
for k in B I NS NI; do server P$k$SHORT 0 $SHORT $k; server P$k$LONG 0 $LONG $k; done
log "server -N with $IDLE idle sessions connected"
server PNX$SHORT "$IDLE" $SHORT simple-update; server PNX$LONG "$IDLE" $LONG simple-update

log "computing the table (passes took $(( $(date +%s) - START )) s)"
if [ -n "$OUT" ]; then
  python3 "$HERE/parse.py" table "$DATA" "$SHORT" "$LONG" "$IDLE" > "$OUT"; log "wrote $OUT"
else
  python3 "$HERE/parse.py" table "$DATA" "$SHORT" "$LONG" "$IDLE"
fi
