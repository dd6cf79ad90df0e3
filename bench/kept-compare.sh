#!/usr/bin/env bash
# Kept FastCGI connections, before and after (issue 39, items 1 and 3): bench/run.sh alternated
# between "before" (nginx closes each upstream connection after its response, the workers accept
# themselves: TODOSYNC_UPSTREAM_KEEPALIVE=0 TODOSYNC_FASTCGI_DISPATCH=0) and "after" (the stack's
# defaults: upstream keepalive, one dispatcher thread), ROUNDS rounds of one each, same binary,
# same data (seeded once, reused). Prints each phase's req/s and p99 per run with the box's load
# before and after it, then the after/before ratio of the medians. A measurement, not a test; on
# a busy box only the ratio of alternated runs means anything.
#
#   bench/kept-compare.sh                          # quick data, ceilings + GET todos by date, 3 rounds
#   KEPT_ROUNDS=5 BENCH_DURATION=10 bench/kept-compare.sh
#
# Knobs: KEPT_ROUNDS (3), KEPT_SCENARIOS (ceilings,todos_by_date), KEPT_VARIANTS (plain),
# KEPT_REUSE_DATA (0; 1: the first run too reuses the data a previous comparison kept), and
# bench/run.sh's own (BENCH_QUICK defaults to 1 here; BENCH_HTTP_PORT/BENCH_HTTPS_PORT,
# BENCH_STATE_DIR (.state/bench-kept), BENCH_SKIP_BUILD).
set -euo pipefail
BENCH_DIR=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
REPO_ROOT=$(dirname "$BENCH_DIR")
cd "$REPO_ROOT"
ROUNDS=${KEPT_ROUNDS:-3}
export BENCH_QUICK=${BENCH_QUICK:-1} BENCH_PEER=${BENCH_PEER:-0}
export BENCH_SCENARIOS=${KEPT_SCENARIOS:-ceilings,todos_by_date} BENCH_VARIANTS=${KEPT_VARIANTS:-plain}
export BENCH_STATE_DIR=${BENCH_STATE_DIR:-.state/bench-kept} BENCH_KEEP_DATA=1
OUT=$(realpath -m "$BENCH_STATE_DIR")-compare
rm -rf "$OUT"
mkdir -p "$OUT"

run=0
for round in $(seq 1 "$ROUNDS"); do
    for side in before after; do
        run=$((run + 1))
        settings=()
        [[ $side == before ]] && settings=(TODOSYNC_UPSTREAM_KEEPALIVE=0 TODOSYNC_FASTCGI_DISPATCH=0)
        reuse=1
        ((run == 1)) && reuse=${KEPT_REUSE_DATA:-0}
        skip_build=${BENCH_SKIP_BUILD:-0}
        ((run > 1)) && skip_build=1
        echo "== round $round, $side (${settings[*]:-defaults}); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
        env "${settings[@]}" BENCH_REUSE_DATA=$reuse BENCH_SKIP_BUILD=$skip_build "$BENCH_DIR/run.sh" \
            >"$OUT/run-$run-$side.log" 2>&1 || { tail -30 "$OUT/run-$run-$side.log"; exit 1; }
        cp "$(realpath -m "$BENCH_STATE_DIR")/results/summary.json" "$OUT/run-$run-$side.json"
        echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    done
done

python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {"before": [], "after": []}
for path in sorted(glob.glob(os.path.join(out, "run-*.json")), key=lambda p: int(p.split("-")[-2])):
    side = path.rsplit("-", 1)[1].split(".")[0]
    with open(path) as f:
        summary = json.load(f)
    runs[side].append(summary)
keys = [k for k in runs["after"][0]["results"] if isinstance(runs["after"][0]["results"][k], dict)
        and "rps" in runs["after"][0]["results"][k]]
print(f"{'phase':<24} {'before req/s (p99 ms)':<40} {'after req/s (p99 ms)':<40} after/before (medians)")
for k in keys:
    cells = {}
    for side in ("before", "after"):
        vals = [(s["results"][k]["rps"], s["results"][k].get("p99Ms")) for s in runs[side] if k in s["results"]]
        cells[side] = vals
    b = statistics.median(v[0] for v in cells["before"]) if cells["before"] else None
    a = statistics.median(v[0] for v in cells["after"]) if cells["after"] else None
    fmt = lambda vals: ", ".join(f"{r:,.0f} ({p:.1f})" if p is not None else f"{r:,.0f}" for r, p in vals)
    ratio = f"{a / b:.2f}x" if a and b else "-"
    print(f"{k:<24} {fmt(cells['before']):<40} {fmt(cells['after']):<40} {ratio}")
for side in ("before", "after"):
    for i, s in enumerate(runs[side], 1):
        print(f"{side} run {i}: uptime before: {s['uptimeBefore'].strip()}")
        print(f"{side} run {i}: uptime after:  {s['uptimeAfter'].strip()}")
PY
