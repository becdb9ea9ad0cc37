#!/usr/bin/env bash
# One short call on a GPU (about 5 minutes on an H100): the ensemble (models/ensemble.py, a cell's
# target and reference models trained together, what a cell does on CUDA) against the same models
# trained one after another (what a cell does on the CPU).
#
#   bash benchmarks/gpu_ensemble_check.sh [OUT]        (OUT defaults to $OUT/gpu-ensemble or /tmp)
#
# 1. benchmarks/bench_ensemble.py on CUDA, LFW20's quick shapes (synthetic records): 3 models
#    (a non-private cell: target + R = 2) and 5 (an ldp cell: target + 2 copying + 2 non-private),
#    solo and ensemble taking turns; prints the ratio solo / ensemble and each member's distance to
#    its solo run beside the distance between two solo runs (cuDNN's own run-to-run spread); and
#    DP-Adam's 3 (a cdp cell's target and copying references: models/dp/dp_ensemble.py against
#    solo train_dp_vae with book-keeping clipping).
# 2. One sweep, digits quick (lfw-subset's quick cells have no reference records), mech none and
#    ldp (eps_i 4; 2 + 4 reference models), seed 0, float32, run twice: with
#    the ensemble switched off (models.ensemble.ENSEMBLE_DEVICE_TYPES emptied) and on; prints both
#    wall times, benchmarks/compare_precision.py's comparison of the rows (MI AP within the rows'
#    bootstrap bands, accuracy within its binomial band) and the count of values that differ at
#    all (benchmarks/compare_runs.py).
set -euo pipefail
OUT=${1:-${OUT:-/tmp}/gpu-ensemble}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python benchmarks/bench_ensemble.py --device cuda --epochs 5 --repeats 3 | tee "$OUT/bench-3.txt"
python benchmarks/bench_ensemble.py --device cuda --epochs 5 --repeats 3 \
    --sizes 200 186 186 186 186 | tee "$OUT/bench-5.txt"
python benchmarks/bench_ensemble.py --device cuda --epochs 3 --repeats 3 --dp | tee "$OUT/bench-dp-3.txt"

sweep() {  # sweep MODE ARGS...: benchmark.py with the ensemble on (MODE ensemble) or off (solo)
    local mode=$1
    shift
    python benchmarks/sweep_ensemble_switch.py "$([ "$mode" = solo ] && echo off || echo on)" "$@"
}

ARGS=(--dataset digits --mech none ldp --grid 4 --profile quick --seeds 0 --no-report
      --no-progress --device cuda --precision float32)
for mode in solo ensemble; do
    start=$(date +%s%N)
    sweep "$mode" "${ARGS[@]}" --out "$OUT/cells-$mode" > "$OUT/cells-$mode.log" 2>&1
    echo "sweep with $mode training: $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$OUT/times.txt"
done
python benchmarks/compare_precision.py "$OUT/cells-solo/runs.csv" "$OUT/cells-ensemble/runs.csv" \
    | tee "$OUT/compare.txt" || true  # exit 1: a value outside its band (read the lines)
python benchmarks/compare_runs.py "$OUT/cells-solo/runs.csv" "$OUT/cells-ensemble/runs.csv" \
    --metrics-only | tail -1 | tee -a "$OUT/compare.txt"
