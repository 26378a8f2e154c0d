#!/usr/bin/env bash
# How much simulated figures move with the heap layout: every point below run under six
# layouts (`--sim-layout-shift 0..5`), each a deterministic run; writes tools/layout/spread.csv
# (one row per point and shift) and prints, per point, the spread (max/min - 1) and the
# standard deviation over the shifts. docs/sim.md ("Layout") quotes it.
#
# Usage: tools/layout/spread.sh [LOCKSTACK_BINARY]   (default: target/release/lockstack)
# About 10 minutes on an idle 2-core host (two runs at a time; tpcb-like at 64 clients, one
# branch at scale 1, is left out: a minute of simulation per run).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/lockstack}
out=tools/layout/spread.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jobs=()
for profile in xeon-32 opteron-24 power8-192; do
  for preset in pg92 pg17; do
    for point in "select-only 1" "select-only 16" "select-only 64" "tpcb-like 1" "tpcb-like 16"; do
      for shift in 0 1 2 3 4 5; do
        jobs+=("$profile $preset $point $shift")
      done
    done
  done
done
printf '%s\n' "${jobs[@]}" | xargs -P 2 -L 1 sh -c '
  t=$((4096 / $4))
  tps=$("$0" pgbench -s 1 -b "$3" -c "$4" -j "$4" -t "$t" --machine "$1" --preset "$2" \
        --sim-layout-shift "$5" 2>/dev/null | sed -n "s/^tps = \([0-9.]*\) .*/\1/p")
  echo "$1,$2,$3,$4,$5,$tps" > "'"$tmp"'/$1-$2-$3-$4-$5"
' "$bin"
{
  echo "profile,preset,script,clients,shift,tps"
  cat "$tmp"/* | sort -t, -k1,1 -k2,2 -k3,3 -k4,4n -k5,5n
} > "$out"
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
points = {}
for r in rows:
    points.setdefault((r["profile"], r["preset"], r["script"], int(r["clients"])), []).append(float(r["tps"]))
print(f'{"profile":<11} {"preset":<5} {"script":<11} {"c":>3} {"min tps":>10} {"max tps":>10} {"spread":>7} {"sd/mean":>7}')
for k in sorted(points):
    v = points[k]
    print(f"{k[0]:<11} {k[1]:<5} {k[2]:<11} {k[3]:>3} {min(v):>10.0f} {max(v):>10.0f} {100*(max(v)/min(v)-1):>6.2f}% {100*statistics.pstdev(v)/statistics.mean(v):>6.2f}%")
PY
