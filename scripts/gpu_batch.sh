#!/usr/bin/env bash
# One GPU call while days are being written: for each day, its own GPU tests (its test file and
# its rows of tests/test_gpu_days.py, so half-written days elsewhere do not matter), then its
# sweep. Logs into $OUT/batch.tgz.   bash scripts/gpu_batch.sh "51 56 60" [seconds per step]
set -uo pipefail
days="${1:-}"; per="${2:-150}"
out="${OUT:-/tmp/out}"; logs=/tmp/gpu_batch_logs
rm -rf "$logs"; mkdir -p "$out" "$logs"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for d in $days; do
  t0=$(date +%s)
  timeout "$per" python3 -m pytest -q -p no:cacheprovider -x tests/days/test_day$d.py tests/test_gpu_days.py -k "day$d or $d" > "$logs/tests$d.log" 2>&1
  echo "day $d tests: exit $? in $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|Error|FAILED|assert" "$logs/tests$d.log" | tail -12
  if [ -f ".notes/day${d}_sweep.py" ]; then
    t0=$(date +%s)
    timeout "$per" python3 ".notes/day${d}_sweep.py" > "$logs/sweep$d.log" 2>&1
    echo "day $d sweep: exit $? in $(( $(date +%s) - t0 )) s"; tail -25 "$logs/sweep$d.log"
  fi
  tar czf "$out/batch.tgz" -C "$logs" .
done
