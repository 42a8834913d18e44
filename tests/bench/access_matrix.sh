#!/usr/bin/env bash
# The access-matrix plugin's slowdown: the same small run plain, sampled (--access-sample 64, the
# default) and counting every access (--access-sample 1), interleaved, REPEATS times each. Under
# real-time TCG the workload runs for its duration either way, so the slowdown shows as lost
# throughput (numa01's GB/s) and a longer boot. The slowdown is the report's (lab.analysis.access_counts.slowdown):
# Hmean GB/s of the plain runs over Hmean GB/s of a configuration's; runs that never finished
# numa01-thread-alloc's prefault (their GB/s counts page faults) are flagged and left out of both.
# Prints figures; not a pass/fail test.
#
#   tests/bench/access_matrix.sh [REPEATS] [DURATION_S]   (default 2 repeats of 8 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
repeats=${1:-2}
duration=${2:-8}
out=$(mktemp -d)/bench-access
mkdir -p "$out"
common=(--topology ring-4 --cpus-per-node 1 --mem-per-node 256M --workload numa01-thread-alloc
        --duration "$duration" --accel tcg --no-trace --numa-balancing on)
echo "cores: $(nproc); ring-4 (4 vCPUs, 1 GiB), numa01-thread-alloc ${duration}s, balancing on; $repeats repeats -> $out"
for i in $(seq "$repeats"); do
  for cfg in plain s64 s1; do
    case $cfg in
      plain) extra=() ;;
      s64) extra=(--access-matrix --access-sample 64) ;;
      s1) extra=(--access-matrix --access-sample 1) ;;
    esac
    "$VENV/bin/numalab" run "${common[@]}" "${extra[@]}" --out "$out/$cfg-$i" --json > "$out/$cfg-$i.json" 2>/dev/null || true
  done
done
"$VENV/bin/python" - "$out" "$repeats" <<'PY'
# The slowdown as the report computes it (lab.analysis.access_counts.slowdown): Hmean GB/s of the plain runs over
# Hmean GB/s of a configuration's runs; runs that never finished the prefault are flagged and left out.
import json, statistics, sys
from pathlib import Path
from lab.analysis.access_counts import prefault_unfinished, slowdown
from lab.analysis.stats import hmean
out, repeats = Path(sys.argv[1]), int(sys.argv[2])
rows = {}
for cfg in ("plain", "s64", "s1"):
    ms = [json.loads((out / f"{cfg}-{i}.json").read_text()) for i in range(1, repeats + 1)]
    ok = [m for m in ms if m["status"] == "ok"]
    stuck = [m for m in ok if prefault_unfinished(m["workload"]["result"])]
    for m in stuck:
        print(f"left out: {cfg} {m['run_id']}: {prefault_unfinished(m['workload']['result'])}"
              f" ({m['workload']['result']['gbps']:.3f} GB/s)")
    done = [m for m in ok if m not in stuck]
    gbps = [m["workload"]["result"]["gbps"] for m in done]
    boot = [m["timings"]["boot_s"] for m in ok]
    local = [m["access_matrix"]["local_pct"] for m in done if "access_matrix" in m]
    rows[cfg] = (gbps, statistics.median(boot) if boot else None, local, len(ok), len(stuck))
base_b = rows["plain"][1]
print(f"{'':8}{'ok':>4}{'left out':>9}{'Hmean GB/s':>11}{'slowdown':>10}{'boot s':>8}{'boot x':>8}  access-local %")
for cfg, (gbps, b, local, n, stuck) in rows.items():
    s = slowdown(rows["plain"][0], gbps)
    h = hmean(gbps)
    bx = f"{b / base_b:.1f}x" if b and base_b else "-"
    print(f"{cfg:8}{n:>4}{stuck:>9}{f'{h:.3f}' if h else '-':>11}{f'{s:.1f}x' if s else '-':>10}{b or 0:>8.2f}{bx:>8}  "
          f"{', '.join(f'{v:.1f}' for v in local) or '-'}")
PY
