#!/usr/bin/env bash
# One call on the GPU machine: tests, then benchmarks with --save, then a tarball under $OUT.
#   bash scripts/gpu_session.sh "1 2 3" [test|notest] [extra pytest args...]
# Run from the repo root there, after `source .devwheels/activate.sh` (see shared/device).
# GIT_COMMIT should be set by the caller: the GPU machine gets the tree without .git.
set -uo pipefail
days="${1:-}"
mode="${2:-test}"
shift 2 2>/dev/null || true
out="${OUT:-/tmp/out}"
mkdir -p "$out" results
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$out/nvidia-smi.txt"
rc=0
if [ "$mode" = "test" ]; then
  make test-all PYTEST="python3 -m pytest -q -rs $*" 2>&1 | tee "$out/test-all.log" | tail -25
  rc=${PIPESTATUS[0]}
  echo "make test-all exit code: $rc"
fi
for d in $days; do
  python3 run_day.py "$d" --bench --save > "$out/bench$d.log" 2>&1
  echo "day $d bench exit code $? ($(grep -c FAIL "$out/bench$d.log") FAIL lines)"
done
tar czf "$out/results.tgz" results progress.md days/*/README.md $(ls days/*/*.png 2>/dev/null) 2>/dev/null
tar czf "$out/logs.tgz" -C "$out" $(cd "$out" && ls *.log 2>/dev/null) 2>/dev/null
exit $rc
