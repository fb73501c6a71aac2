#!/usr/bin/env bash
# One call on the GPU machine: tests, then benchmarks with --save, packed into two tarballs.
#   GIT_COMMIT=<sha> bash scripts/gpu_session.sh "1 2 3" [test|notest] [extra pytest args...]
# Run from the repo root there, after `source .devwheels/activate.sh` (see shared/device).
# The GPU machine gets the tree without .git, so the caller passes GIT_COMMIT. Only a few
# files come back from $OUT: everything goes into $OUT/results.tgz and $OUT/logs.tgz.
set -uo pipefail
days="${1:-}"
mode="${2:-test}"
shift 2 2>/dev/null || true
out="${OUT:-/tmp/out}"
logs=/tmp/gpu_session_logs
rm -rf "$logs"; mkdir -p "$out" "$logs" results
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$logs/nvidia-smi.txt"
rc=0
if [ "$mode" = "test" ]; then
  make test-all PYTEST="python3 -m pytest -q -rs $*" > "$logs/test-all.log" 2>&1
  rc=$?
  tail -15 "$logs/test-all.log"
  echo "make test-all exit code: $rc"
fi
for d in $days; do
  timeout 300 python3 run_day.py "$d" --bench --save > "$logs/bench$d.log" 2>&1
  echo "day $d: bench exit code $?, $(grep -c '^FAILURES:' "$logs/bench$d.log") FAILURES section(s)"
  tar czf "$out/results.tgz" results $(ls days/*/*.png 2>/dev/null)  # after each day: a time-out keeps what is done
  tar czf "$out/logs.tgz" -C "$logs" .
done
tar czf "$out/results.tgz" results progress.md days/*/README.md $(ls days/*/*.png 2>/dev/null)
tar czf "$out/logs.tgz" -C "$logs" .
exit $rc
