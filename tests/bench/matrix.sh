#!/usr/bin/env bash
# Matrix packing: a 12-run matrix on this host, then its wall time and host-core
# utilisation = sum(run CPU seconds) / (cores x wall), as `numalab matrix run`
# reports them. Prints figures; not a pass/fail test (these machines are noisy).
#
#   tests/bench/matrix.sh [OUT] [DURATION_S]   (default 20 s workloads)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
out=${1:-$(mktemp -d)/bench-matrix}
duration=${2:-20}
spec=$(mktemp --suffix=.yaml)
trap 'rm -f "$spec"' EXIT
cat > "$spec" <<'YAML'
name: bench-12
description: 12 short runs (2 topologies x 2 settings x 3 repeats), 2 vCPUs each.
topologies: [{name: ring-2, cpus_per_node: 1}, {name: mesh-2, cpus_per_node: 1}]
workloads: [{name: numa01, duration: DURATION}]
settings: [{name: on}, {name: off, numa_balancing: off}]
repeats: 3
YAML
sed -i "s/DURATION/$duration/" "$spec"
echo "cores: $(nproc); matrix: 12 runs of ${duration}s numa01 -> $out"
"$VENV/bin/numalab" matrix run "$spec" --out "$out" --no-reports | tee "$out.txt"
