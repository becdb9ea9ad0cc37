#!/bin/bash
# A whole cell, an older commit of this code against the working tree, on one fixed explicit
# workload, the two taking turns; prints each run's process wall and CPU seconds and the cell's
# wall_s, then compares the two runs.csv value by value (benchmarks/compare_runs.py).
#
#   bash benchmarks/bench_versions.sh OLD_COMMIT [REPEATS] [-- benchmark.py workload flags]
#
# Default workload (LFW20, DATA_HOME from $DPVAE_LFW_HOME): mech none, quick, 5 epochs, 100
# training faces, N = 5, 40 attacked records, 400 generated faces, no reference models, one thread.
# Since issue 38 the working tree's defaults are --device auto --precision auto (bf16 on a CPU with
# AVX-512 BF16 or AMX): to compare float32 rows there, give a workload with --precision float32
# (commits from 8493bf2 on take it).
set -eu
old=$1; reps=${2:-2}; shift $(( $# >= 2 ? 2 : 1 ))
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
if [ $# -gt 0 ]; then W=("$@"); else
  W=(--dataset lfw20 --data-home "${DPVAE_LFW_HOME:?set DPVAE_LFW_HOME or give the workload}"
     --mech none --profile quick --epochs 5 --max-train 100 --attack-samples 5
     --attack-records 40 --gen-records 400 --classifier-epochs 1 --reference-models 0 --seeds 0)
fi
tmp=$(mktemp -d); trap 'git -C "$here" worktree remove --force "$tmp/old-tree" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
git -C "$here" worktree add --detach -q "$tmp/old-tree" "$old"
for rep in $(seq "$reps"); do
  for v in old new; do
    tree=$here; [ $v = old ] && tree=$tmp/old-tree
    rm -rf "$tmp/out-$v"
    start=$(date +%s.%N)
    ( cd "$tree" && OMP_NUM_THREADS=${THREADS:-1} PYTHONPATH=$tree /usr/bin/time -f "%U %S" -o "$tmp/cpu" \
        "$py" benchmark.py "${W[@]}" --out "$tmp/out-$v" --no-report --no-progress > "$tmp/log-$v" 2>&1 )
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    cell=$("$py" -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(' '.join(sorted({f'{float(x[\"wall_s\"]):.1f}' for x in r})))" "$tmp/out-$v/runs.csv")
    echo "$v ($( [ $v = old ] && echo "$old" || echo working tree )) rep $rep: process wall $(printf %.1f "$wall") s, CPU $(awk '{printf "%.1f", $1+$2}' "$tmp/cpu") s, cell wall_s $cell"
  done
done
"$py" "$here/benchmarks/compare_runs.py" "$tmp/out-old/runs.csv" "$tmp/out-new/runs.csv" --metrics-only
