#!/usr/bin/env bash
# Cachegrind's data-cache misses per pgbench -S transaction, for the three layouts of
# `lockstack machine layout` (docs/sim.md, "The layout experiment"), on the native binary.
#
# Each layout runs twice under `valgrind --tool=cachegrind --cache-sim=yes` (N1 and N2
# transactions, 1 client, scale 1, preset pg96); the difference of the two runs' totals over
# N2 - N1 is the cost of one transaction without the load and start-up. The caches are
# xeon-32's private ones by default: D1 32 KiB 8-way (Nehalem's L1D) and, as cachegrind's
# "last level", the 256 KiB 8-way private L2 that the model's `private` cache is, so that
# LL misses are comparable with the model's private-cache misses. Override with D1=, LL=.
#
# Then the model's side, the same layouts at 1 client and 400 transactions on xeon-32
# (`lockstack machine layout`, which needs the simulating binary that build.rs builds), into
# model.csv next to OUT.
#
# Usage: tools/cachegrind/run.sh [OUT.csv]   (default tools/cachegrind/misses.csv)
# Needs valgrind and a release build (LOCKSTACK_NO_SIM_BUILD=1 cargo build --release -p
# lockstack-cli); LOCKSTACK_BIN names another binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${LOCKSTACK_BIN:-target/release/lockstack}
out=${1:-tools/cachegrind/misses.csv}
n1=${N1:-100}
n2=${N2:-400}
d1=${D1:-32768,8,64}
ll=${LL:-262144,8,64}
command -v valgrind >/dev/null || { echo "run.sh: valgrind is not installed" >&2; exit 1; }
[ -x "$bin" ] || { echo "run.sh: $bin: no such binary (build it first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The layouts, as machine_layout.rs's LAYOUTS sets them.
layouts=(
    "pgproc procarray.layout=pgproc bufmgr.desc_padding=line"
    "pgxact procarray.layout=pgxact bufmgr.desc_padding=line"
    "pgxact+packed-desc procarray.layout=pgxact bufmgr.desc_padding=none"
)

# The summary of a cachegrind output file as "event=value" words.
summary() {
    awk '/^events:/ { for (i = 2; i <= NF; i++) ev[i] = $i }
         /^summary:/ { for (i = 2; i <= NF; i++) printf "%s=%s ", ev[i], $i; print "" }' "$1"
}

echo "layout,transactions,d1_bytes_ways_line,ll_bytes_ways_line,instructions_per_txn,data_refs_per_txn,d1_misses_per_txn,ll_misses_per_txn" >"$out"
for l in "${layouts[@]}"; do
    set -- $l
    name=$1
    shift
    sets=()
    for s in "$@"; do sets+=(--set "$s"); done
    for n in "$n1" "$n2"; do
        valgrind --tool=cachegrind --cache-sim=yes --D1="$d1" --LL="$ll" \
            --cachegrind-out-file="$tmp/$name.$n" \
            "$bin" pgbench -s 1 -S -c 1 -j 1 -t "$n" --preset pg96 "${sets[@]}" \
            >"$tmp/$name.$n.txt" 2>"$tmp/$name.$n.err" || {
            echo "run.sh: $name -t $n failed:" >&2
            cat "$tmp/$name.$n.err" >&2
            exit 1
        }
    done
    a=$(summary "$tmp/$name.$n1")
    b=$(summary "$tmp/$name.$n2")
    python3 - "$name" "$n1" "$n2" "$d1" "$ll" "$a" "$b" >>"$out" <<'PY'
import sys
name, n1, n2, d1, ll, a, b = sys.argv[1:]
pa = dict(w.split("=") for w in a.split())
pb = dict(w.split("=") for w in b.split())
d = lambda k: (int(pb[k]) - int(pa[k])) / (int(n2) - int(n1))
print(f"{name},{int(n2) - int(n1)},{d1.replace(',', '/')},{ll.replace(',', '/')},{d('Ir'):.0f},{d('Dr') + d('Dw'):.0f},"
      f"{d('D1mr') + d('D1mw'):.2f},{d('DLmr') + d('DLmw'):.2f}")
PY
done
cat "$out"

model=$(dirname "$out")/model.csv
"$bin" machine layout --profiles xeon-32 -c 1 --transactions 400 --out "$tmp/model" >"$tmp/model.txt"
cp "$tmp/model/layout.csv" "$model"
cat "$tmp/model.txt"
