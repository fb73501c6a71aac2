#!/usr/bin/env bash
# One GPU call for tuning: each day's .notes/dayNN_sweep.py (candidates checked once, then timed),
# then the GPU tests of the given days; logs into $OUT/sweeps.tgz.
#   bash scripts/gpu_sweeps.sh "21 25 26" ["pytest -k expression"] [seconds per sweep]
set -uo pipefail
days="${1:-}"
tests="${2:-}"
per="${3:-150}"
out="${OUT:-/tmp/out}"
logs=/tmp/gpu_sweep_logs
rm -rf "$logs"; mkdir -p "$out" "$logs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$logs/nvidia-smi.txt"
for d in $days; do
  s=".notes/day${d}_sweep.py"
  [ -f "$s" ] || { echo "day $d: no sweep script"; continue; }
  start=$(date +%s)
  timeout "$per" python3 "$s" > "$logs/sweep$d.log" 2>&1
  echo "day $d sweep: exit $? in $(( $(date +%s) - start )) s"
  tail -40 "$logs/sweep$d.log"
  tar czf "$out/sweeps.tgz" -C "$logs" .
done
if [ -n "$tests" ]; then
  python3 -m pytest -q -x -n 8 -p no:cacheprovider tests -k "$tests" > "$logs/tests.log" 2>&1
  echo "tests exit $?"; grep -E "passed|failed|Error|FAILED" "$logs/tests.log" | tail -25
fi
tar czf "$out/sweeps.tgz" -C "$logs" .
