#!/usr/bin/env bash
# The simple-protocol pass: pgbench -M simple (each statement sent as text, so parse, analyze,
# rewrite and plan run every time) instead of measure.sh's -M prepared. Same method as measure.sh's
# server passes: the postmaster under valgrind --trace-children=yes, one pgbench client, a short
# and a long run of the same script, the measured backend's PostgresMain inclusive difference;
# residuals = total minus the regions' functions and all LWLock calls (table.py's covered()).
# usage: tools/pg-costs/measure-simple.sh [TOML]   (default: print the block to stdout; with TOML,
#        the block between the '# ---- simple protocol' markers in TOML is replaced, or appended)
# needs: what measure.sh needs. Tags: QS QN QT QB QI QNS QNI (Q = simple Query message).
# PGCOSTS_ONLY="QB QI" reruns those passes; PGCOSTS_TABLE_ONLY=1 only recomputes from data/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${PGBIN:-/usr/lib/postgresql/15/bin}
OUT=${1:-}
DATA=${PGCOSTS_DATA:-$HERE/data}
SHORT=${PGCOSTS_SHORT:-200}
LONG=${PGCOSTS_LONG:-1000}
log() { echo "[measure-simple.sh $(date -u +%H:%M:%S)] $*" >&2; }
want() { [ -z "${PGCOSTS_ONLY:-}" ] || [[ " $PGCOSTS_ONLY " == *" $1 "* ]]; }
mkdir -p "$DATA"
START=$(date +%s)
if [ -z "${PGCOSTS_TABLE_ONLY:-}" ]; then
W=$(mktemp -d /tmp/pgcosts-simple.XXXXXX)
if [ "$(id -u)" = 0 ]; then chown postgres "$W"; as_pg() { runuser -u postgres -- "$@"; }; else as_pg() { "$@"; }; fi
trap 'as_pg "$BIN/pg_ctl" -D "$W/run" stop -m immediate >/dev/null 2>&1 || true; rm -rf "$W"' EXIT

log "initdb + pgbench -i -s 1 in $W"
as_pg "$BIN/initdb" -D "$W/base" -A trust >/dev/null
PORT=$((55000 + RANDOM % 1000))
as_pg "$BIN/pg_ctl" -D "$W/base" -o "-k $W -p $PORT -c listen_addresses=''" -l "$W/base.log" -w start >/dev/null
as_pg "$BIN/pgbench" -h "$W" -p $PORT -i -s 1 -q postgres >/dev/null 2>&1
as_pg "$BIN/pg_ctl" -D "$W/base" -w stop -m fast >/dev/null

summarize() { # TAG: as measure.sh's, plus the parse/analyze/rewrite/plan functions (table_simple.EXTRA)
  local tag=$1
  callgrind_annotate --inclusive=yes --tree=both --threshold=100 "$W/$tag.cg" > "$W/$tag.tree" 2>/dev/null
  callgrind_annotate --inclusive=yes --threshold=100 "$W/$tag.cg" > "$W/$tag.incl" 2>/dev/null
  head -200 "$W/$tag.incl" > "$DATA/$tag.inclusive.txt"
  (cd "$HERE" && python3 -c 'import sys, json, parse, table, table_simple
keep = table.NEEDED | table_simple.EXTRA
json.dump({k: v for k, v in parse.extract(sys.argv[1]).items() if k in keep}, sys.stdout, indent=0, sort_keys=True)' "$W/$tag.tree") > "$DATA/$tag.funcs.json"
  log "$tag: $(grep -m1 'PROGRAM TOTALS' "$DATA/$tag.inclusive.txt")"
}
server() { # TAG NTX SCRIPT  (measure.sh's server(), -M simple, no idle sessions)
  local tag=$1 ntx=$2 script=$3
  want "${tag%%[0-9]*}" || return 0
  rm -rf "$W/run" "$W/cg.$tag"; as_pg cp -a "$W/base" "$W/run"; as_pg mkdir "$W/cg.$tag"
  as_pg valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$W/cg.$tag/cg.%p" \
    "$BIN/postgres" -D "$W/run" -k "$W" -p $PORT -c listen_addresses='' -c fsync=off \
    -c full_page_writes=off -c autovacuum=off > "$W/srv.$tag.log" 2>&1 &
  local srv=$!
  for _ in $(seq 120); do as_pg "$BIN/pg_isready" -h "$W" -p $PORT -q && break; sleep 1; done
  as_pg "$BIN/psql" -h "$W" -p $PORT -q -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" \
    -c "SELECT pg_prewarm(c) FROM unnest(array['pgbench_accounts','pgbench_accounts_pkey','pgbench_tellers','pgbench_tellers_pkey','pgbench_branches','pgbench_branches_pkey','pgbench_history']) c" postgres >/dev/null
  local sel=(-b "$script"); [ -f "$HERE/scripts/$script.sql" ] && sel=(-f "$HERE/scripts/$script.sql")
  as_pg "$BIN/pgbench" -h "$W" -p $PORT -n "${sel[@]}" -M simple -c 1 -t "$ntx" postgres > "$W/pgbench.$tag.out" 2>&1
  grep -q "actually processed: $ntx/$ntx" "$W/pgbench.$tag.out" || { cat "$W/pgbench.$tag.out" >&2; exit 1; }
  as_pg "$BIN/pg_ctl" -D "$W/run" -w stop -m fast >/dev/null 2>&1 || true
  wait $srv 2>/dev/null || true
  local best; best=$(python3 "$HERE/parse.py" pick "$W/cg.$tag"/cg.*)
  cp "$best" "$W/$tag.cg"; summarize "$tag"; rm -rf "$W/cg.$tag"
}
log "server, pgbench -M simple -c 1: -S, -N, tpcb-like and scripts/{B,I,NS,NI} ($SHORT and $LONG transactions each)"
for k in S:select-only N:simple-update T:tpcb-like B:B I:I NS:NS NI:NI; do
  server Q${k%%:*}$SHORT $SHORT ${k#*:}; server Q${k%%:*}$LONG $LONG ${k#*:}
done
log "passes took $(( $(date +%s) - START )) s"
fi
BLOCK=$(cd "$HERE" && python3 table_simple.py "$DATA" "$SHORT" "$LONG")
if [ -n "$OUT" ]; then
  printf '%s\n' "$BLOCK" | python3 -c '
import sys
path = sys.argv[1]; block = sys.stdin.read().rstrip("\n") + "\n"
t = open(path).read()
b, e = "# ---- simple protocol (tools/pg-costs/measure-simple.sh) ----", "# ---- end simple protocol ----"
if b in t:
    t = t[:t.index(b)] + block + t[t.index(e) + len(e) + 1:]
else:
    t = t.rstrip("\n") + "\n\n" + block
open(path, "w").write(t)' "$OUT"
  log "wrote the simple-protocol block into $OUT"
else
  echo "$BLOCK"
fi
