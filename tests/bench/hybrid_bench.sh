#!/usr/bin/env bash
# The three cluster strategies on the large-table model of embedding_bench.sh
# (tests/bench/ctr_bench.toml: a DNN classifier over lists of 8 Zipf-distributed item ids
# hashed into 2^22 buckets, embedded in 16 dimensions, batch 256 per replica), in one
# invocation: parameter servers alone, collective all-reduce alone (every replica holds
# the whole table, 256 MiB and as much of Adagrad's accumulators) and hybrid (the table
# on the ps tasks, the dense layers all-reduced). Needs python3-numpy for the data.
#
#   tests/bench/hybrid_bench.sh [build-dir]
#
# Every run is `trainer launch --workers 2 --no_chief` (two training replicas) with 2 ps
# tasks (0 for collective), one intra-op and one inter-op thread per task, the table in
# one part per ps. Examples/s: worker:0's global_step/sec lines after the first, median,
# times the examples one global step is (256 for asynchronous parameter servers, whose
# global step counts every replica's step; 2 x 256 for the synchronous strategies).
# Bytes per worker step: every task's "rpc sent" total (the RPC layer's count), from
# runs of TANDEM_HYBRID_STEPS and 3x that many global steps, the difference over the
# difference in worker steps (start-up, initialisation and the last checkpoint cancel
# out). TANDEM_BENCH_REPS (default 3) alternating rounds; medians.
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
here="$(cd "$(dirname "$0")" && pwd)"
trainer="$build/apps/trainer"
python=${PYTHON:-/usr/bin/python3}
reps=${TANDEM_BENCH_REPS:-3}
steps=${TANDEM_HYBRID_STEPS:-1000}
[[ -x "$trainer" ]] || { echo "build $trainer first"; exit 1; }
"$python" -c "import numpy" 2>/dev/null || { echo "no python3-numpy (scripts/install-deps.sh --bench)"; exit 1; }
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus"

work=/tmp/tandem_ctr  # ctr_bench.toml reads its data here.
mkdir -p "$work"
"$python" "$here/ctr_data.py" --out "$work/ctr" --rows 200000 --batch 256

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run STRATEGY GLOBAL_STEPS: prints "<examples/s> <rpc bytes of every task> <worker steps>".
run() {
  local dir log ps=2 per_step=512 worker_steps
  dir=$(mktemp -d) log=$(mktemp)
  case "$1" in
    parameter_server) per_step=256 worker_steps=$2 ;;
    collective) ps=0 worker_steps=$((2 * $2)) ;;
    hybrid) worker_steps=$((2 * $2)) ;;
  esac
  local extra=()
  [[ "$ps" -gt 0 ]] && extra=(--set distribute.partitioner='"fixed"')
  if ! "$trainer" launch --ps "$ps" --workers 2 --no_chief --command train \
        --config "$here/ctr_bench.toml" --set train.max_steps="$2" \
        --set run.model_dir="\"$dir\"" --set distribute.strategy="\"$1\"" \
        --set run.intra_op_threads=1 --set run.inter_op_threads=1 "${extra[@]}" >"$log" 2>&1; then
    echo "trainer launch ($1) failed; its log:" >&2
    tail -40 "$log" >&2
    rm -rf "$dir" "$log"
    exit 1
  fi
  local rate bytes
  rate=$(grep '^\[worker:0\]' "$log" | sed -n 's/.*global_step\/sec: \([0-9.]*\).*/\1/p' |
         tail -n +2 | median)
  bytes=$(sed -n 's/.*rpc sent: \([0-9]*\) bytes.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
  rm -rf "$dir" "$log"
  echo "$(awk -v r="${rate:-0}" -v p="$per_step" 'BEGIN { printf "%.0f", r * p }') $bytes $worker_steps"
}

strategies=(parameter_server collective hybrid)
declare -A eps bps
for s in "${strategies[@]}"; do eps[$s]="" bps[$s]=""; done
for ((i = 0; i < reps; i++)); do
  for s in "${strategies[@]}"; do
    read -r r1 b1 w1 < <(run "$s" "$steps")
    read -r r3 b3 w3 < <(run "$s" $((3 * steps)))
    eps[$s]="${eps[$s]} $r3"
    bps[$s]="${bps[$s]} $(awk -v a="$b1" -v c="$b3" -v x="$w1" -v y="$w3" 'BEGIN { printf "%.0f", (c - a) / (y - x) }')"
    echo "round $i $s: examples_per_second=$r3 bytes_per_worker_step=$(echo "${bps[$s]}" | awk '{ print $NF }')" >&2
  done
done
isa=$("$build/tests/bench/train_bench" --model gemm_peak --steps 1 2>/dev/null | sed -n 's/.*isa=\([a-z0-9_]*\).*/\1/p' | head -1 || true)
for s in "${strategies[@]}"; do
  echo "strategy=$s table=4194304x16 workers=2 ps=$([[ $s == collective ]] && echo 0 || echo 2)" \
       "examples_per_second=$(echo "${eps[$s]}" | median)" \
       "bytes_per_worker_step=$(echo "${bps[$s]}" | median) isa=${isa:-unknown}"
done
