#!/usr/bin/env bash
# What the default trace extras cost a run (the residency events and the per-node memory samples), in guest
# time: the same run with --lean (NUMA balancing's own events, no node samples) and with the defaults,
# interleaved by seed, on the modelled machine (--qemu charge --clock virtual), whose clock counts the
# guest's instructions, so the host's load does not move the figures and the extras' own instructions
# are all that differs. Prints compare's rows for the workload's figures. Not a pass/fail test.
# docs/reports.md ("What it costs a run") has the figures of 2026-11-27 (8 seeds).
#
#   tests/bench/trace_extras.sh [SEEDS] [DURATION_S]   (default 8 seeds of 5 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
seeds=${1:-8}
duration=${2:-5}
out=$(mktemp -d)/bench-extras
mkdir -p "$out"
common=(--topology ring-2 --workload numa01 --duration "$duration" --numa-balancing on
        --qemu charge --clock virtual --remote-latency slit -q)
echo "ring-2 numa01 ${duration}s on the modelled machine, --lean against the default, seeds 1..$seeds -> $out"
for s in $(seq "$seeds"); do
  "$VENV/bin/numalab" run "${common[@]}" --seed "$s" --lean --out "$out/lean/s$s" > /dev/null 2>&1 || echo "lean seed $s: failed"
  "$VENV/bin/numalab" run "${common[@]}" --seed "$s" --out "$out/default/s$s" > /dev/null 2>&1 || echo "default seed $s: failed"
done
"$VENV/bin/numalab" compare --baseline "$out"/lean/s* --new "$out"/default/s* --json | "$VENV/bin/python" -c '
import json, sys
for r in json.load(sys.stdin)["metrics"]:
    name, ci = r["metric"], r["ci95_diff"] or [None, None]
    if name.startswith("workload.") or name == "vmstat.hint_local_pct":
        print("%-28s %%diff %+.2f%%  p %s  95%% CI of the difference [%s, %s]" % (name, r["pct_diff"], r["p_value"], *ci))
'
