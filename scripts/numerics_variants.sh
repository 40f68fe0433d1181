#!/usr/bin/env bash
# The numerical tests (pytest -m numerics) under other CPU kernel paths and thread counts, one run
# per variant, a line each: they must hold on any x86 machine, not only on the one they were
# written on. Usage: bash scripts/numerics_variants.sh [extra pytest arguments]
# Takes several minutes per variant on 2 cores; not part of .ci/run.
set -uo pipefail
cd "$(dirname "$0")/.."
variants=(
  "ATEN_CPU_CAPABILITY=default"
  "ATEN_CPU_CAPABILITY=avx2"
  "ONEDNN_MAX_CPU_ISA=AVX2"
  "OMP_NUM_THREADS=1"
  "OMP_NUM_THREADS=2"
)
failed=0
for variant in "${variants[@]}"; do
  start=$(date +%s)
  if env "$variant" PYTHONPATH="$PWD" python -m pytest -p no:cacheprovider -n 2 -m numerics "$@" \
      >"/tmp/numerics-${variant//[^A-Za-z0-9]/_}.log" 2>&1; then
    verdict=pass
  else
    verdict=FAIL
    failed=1
  fi
  summary=$(tail -n 1 "/tmp/numerics-${variant//[^A-Za-z0-9]/_}.log")
  printf '%-30s %s in %ss: %s\n' "$variant" "$verdict" "$(( $(date +%s) - start ))" "$summary"
done
exit $failed
