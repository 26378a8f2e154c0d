# Everyday recipes. `just` is optional: each recipe is a plain cargo command (see README.md).

# The tests, as CI runs them.
test:
    cargo test --workspace --release

# loom model checks (separate target dir: --cfg loom rebuilds everything).
loom:
    for f in crates/*/tests/loom_*.rs; do c=$(basename $(dirname $(dirname $f))); RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom LOOM_MAX_PREEMPTIONS=2 cargo test --release -p lockstack-$c --test $(basename $f .rs) || exit 1; done

# criterion benchmarks; pass a filter, e.g. `just bench uncontended`.
bench *FILTER:
    cargo bench -p lockstack-benches -- {{FILTER}}

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# The main job on its default input.
run:
    cargo run --release -p lockstack-cli -- pgbench -s 10 -c 8 -T 10

# One seed experiment (pgxact, old-snapshot, flexlock, fastpath, vm-pin), tables + CSV/JSON/SVG.
experiment NAME *ARGS:
    cargo run --release -p lockstack-cli -- experiment {{NAME}} {{ARGS}}

# pgbench -S on every simulated machine profile under pg91, pg92 and pg17 at 1..128 clients
# (docs/sim.md, "Sweeps"): out/sweep/sweep.csv, sweep.svg and a table; extra flags pass through.
sweep *ARGS:
    cargo run --release -p lockstack-cli -- machine sweep --out out/sweep {{ARGS}}

# Everything CI runs.
ci:
    bash .ci/run

# Every seed's default sweep on its machine (about 10 minutes with --jobs 2), then
# docs/sim-validation.md from them: each published effect next to the simulated prediction.
validation:
    for x in "fastpath opteron-24" "pgxact xeon-32" "pgxact itanium-32" "old-snapshot power8-192" "flexlock xeon-32" "vm-pin xeon-12"; do set -- $x; cargo run --release -p lockstack-cli -- experiment $1 --machine $2 --jobs 2 --out out/validation/$1-$2 || exit 1; done
    cargo run --release -q -p lockstack-cli -- experiment validation out/validation > docs/sim-validation.md
