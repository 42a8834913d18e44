#!/usr/bin/env bash
# Boot overhead: `numalab run --workload idle` against virtme-ng on the same
# kernel and topology (ring-4: 4 nodes x 1 vCPU, 2 GiB), side by side in ABBA order.
# Prints figures; it is not a pass/fail test (these machines are noisy).
#
#   tests/bench/boot.sh [BZIMAGE] [REPEATS]   (REPEATS: default 12, even for ABBA balance)
#
# BZIMAGE defaults to numalab's trimmed baseline kernel (built and cached by numalab kernel build).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"  # vng runs virtme-run from the venv
# Both sides are Python programs: let them keep their bytecode caches, as on a developer's machine
# (some CI and sandbox environments set this, and then every start compiles every module).
unset PYTHONDONTWRITEBYTECODE
NUMALAB="$VENV/bin/numalab"
REPEATS=${2:-12}
[ -x "$VENV/bin/vng" ] || "$VENV/bin/pip" install -q virtme-ng
KERNEL=${1:-}
if [ -z "$KERNEL" ]; then
  # virtme-ng needs 9p and virtio built in (the modular stock kernel panics there without its modules):
  # use numalab's trimmed baseline, building it first if needed.
  "$NUMALAB" kernel build --quiet --name baseline > /dev/null
  KERNEL=$("$VENV/bin/python" -c 'from lab.kernel.resolve import resolve_kernel; print(resolve_kernel("baseline").image)')
fi
ACCEL=$("$VENV/bin/python" -c 'from lab.host.accel import accel_verdict; from pathlib import Path; import sys; print(accel_verdict(Path(sys.argv[1]))["accel"])' "$KERNEL")
VNG_KVM=(); [ "$ACCEL" = tcg ] && VNG_KVM=(--disable-kvm)
# The same ring-4 as virtme-ng options (numalab topo vng-args), without --pin as the bench always ran it
read -ra VNG_TOPO <<< "$("$NUMALAB" topo vng-args ring-4 --cpus-per-node 1 --no-pin 2>/dev/null)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "kernel: $KERNEL"
echo "accelerator: $ACCEL; repeats: $REPEATS"
# Order: numalab vng, vng numalab, numalab vng, ... (ABBA). A VM run leaves this host slower for
# the next one, by more when the next is the other tool (measured: numalab 0.26 s slower right
# after vng than after numalab; vng 0.17 s slower after numalab than after vng). With strict
# alternation every run would follow the other tool; with ABBA each tool follows itself and the
# other equally often. The medians are printed both ways.
: > "$out/numalab"; : > "$out/overhead"; : > "$out/vng"; : > "$out/after"
prev=none
run_numalab() {
  local t0 t1
  t0=$(now)
  "$NUMALAB" run --topology ring-4 --cpus-per-node 1 --kernel "$KERNEL" --workload idle --duration 0.1 \
    --accel "$ACCEL" --out "$out/run$i" --json > "$out/run$i.json" 2>/dev/null || true
  t1=$(now)
  awk -v a="$t0" -v b="$t1" "BEGIN {printf \"%.2f\\n\", b - a}" >> "$out/numalab"
  echo "numalab $prev $(tail -1 "$out/numalab")" >> "$out/after"
  "$VENV/bin/python" -c 'import json,sys; m=json.load(open(sys.argv[1])); t=m["timings"]; print(round(t["total_s"]-(t["workload_s"] or 0), 2))' "$out/run$i.json" >> "$out/overhead"
  prev=numalab
}
run_vng() {
  local t0 t1
  t0=$(now)
  "$VENV/bin/vng" -v -r "$KERNEL" "${VNG_KVM[@]}" --force-9p "${VNG_TOPO[@]}" --exec true > "$out/vng$i.log" 2>&1 \
    || grep -q "script exited with code 0" "$out/vng$i.log" \
    || { echo "vng run $i failed:" >&2; tail -3 "$out/vng$i.log" >&2; }
  # (without virtio-console in the kernel vng cannot return the exit code and says 255, but the log says it ran)
  t1=$(now)
  awk -v a="$t0" -v b="$t1" "BEGIN {printf \"%.2f\\n\", b - a}" >> "$out/vng"
  echo "vng $prev $(tail -1 "$out/vng")" >> "$out/after"
  prev=vng
}
for i in $(seq "$REPEATS"); do
  if [ $((i % 2)) = 1 ]; then run_numalab; run_vng; else run_vng; run_numalab; fi
  echo "run $i: numalab $(tail -1 "$out/numalab")s (overhead $(tail -1 "$out/overhead")s), vng $(tail -1 "$out/vng")s"
done
n=$(median < "$out/numalab"); v=$(median < "$out/vng"); o=$(median < "$out/overhead")
echo "median wall: numalab idle run ${n}s, vng ${v}s, ratio $(awk -v a="$n" -v b="$v" "BEGIN {printf \"%.2f\", a / b}") (goal <= 0.5)"
for tool in numalab vng; do
  other=$([ $tool = numalab ] && echo vng || echo numalab)
  self_m=$(awk -v t=$tool '$1 == t && $2 == t {print $3}' "$out/after" | median)
  other_m=$(awk -v t=$tool -v o="$other" '$1 == t && $2 == o {print $3}' "$out/after" | median)
  echo "  $tool: median ${self_m:-?}s right after $tool, ${other_m:-?}s right after $other"
done
echo "median run overhead (total - workload): ${o}s (goal <= 4 s on TCG)"
# The floor under both: the same QEMU command line without numalab around it.
"$VENV/bin/python" tests/bench/boot_floor.py "$out/run$REPEATS" "$REPEATS"
