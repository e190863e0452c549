#!/usr/bin/env bash
# Census income (configs/census_*.toml) end to end: tandem's trainer against its PyTorch
# peer (census_peer.py: the same columns and hyper-parameters, nn.EmbeddingBag with
# sparse gradients, Adagrad where TensorFlow uses FTRL), one thread each, in one
# invocation. Needs scripts/install-deps.sh --bench (python3-torch).
#
#   tests/bench/census_bench.sh [build-dir]             speed
#   tests/bench/census_bench.sh [build-dir] --accuracy  40 epochs each, test accuracy / AUC
#
# Speed: for wide_deep, wide and deep, TANDEM_BENCH_REPS (default 3) alternating pairs
# of `trainer train` (1 intra-op and 1 inter-op thread and no prefetch thread: one
# thread, parsing and hashing included) and census_peer.py --threads 1, each timing
# TANDEM_CENSUS_STEPS (default 4000) steps of batch 40 after a warm-up; prints each
# side's median examples/s, the ratio and the pairs' range, and the share of tandem's
# step spent in its input pipeline (input_bench's time per batch over the trainer's
# time per step) beside the peer's.
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
mode=${2:-}
here="$(dirname "$0")"
configs="$here/../../configs"
trainer="$build/apps/trainer"
python=${PYTHON:-/usr/bin/python3}
reps=${TANDEM_BENCH_REPS:-3}
steps=${TANDEM_CENSUS_STEPS:-4000}
[[ -x "$trainer" ]] || { echo "build $trainer first"; exit 1; }
"$python" -c "import torch" 2>/dev/null || { echo "no python3-torch (scripts/install-deps.sh --bench)"; exit 1; }
source "$here/peer_blas.sh"
peer_blas "$python"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus"

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
one_thread=(--set run.intra_op_threads=1 --set run.inter_op_threads=1 --set data.prefetch_buffer=0
            --set run.num_gpus=0)

if [[ "$mode" == "--accuracy" ]]; then
  for m in wide deep wide_deep; do
    dir=$(mktemp -d)
    line=$("$trainer" train_and_evaluate --config "$configs/census_$m.toml" \
             --set run.model_dir="\"$dir\"" 2>/dev/null | grep '^final evaluation')
    rm -rf "$dir"
    echo "tandem census_$m $(echo "$line" | sed -n 's/.*\(accuracy = [0-9.]*\).*\(auc = [0-9.]*\).*/\1 \2/p')"
    "$python" "$here/census_peer.py" --data "$here/../../data/adult" --model "$m" --epochs 40 \
        --eval_every 40
  done
  exit 0
fi

for m in wide_deep wide deep; do
  ours="" theirs="" ratios="" share_peer=""
  for ((i = 0; i < reps; i++)); do
    dir=$(mktemp -d)
    # The StepCounterHook's global_step/sec lines after the first, times the batch.
    rate=$(OMP_NUM_THREADS=1 "$trainer" train --config "$configs/census_$m.toml" \
             --set run.model_dir="\"$dir\"" --set train.max_steps=$((steps + 500)) \
             --set run.log_step_count_steps=500 --set run.save_checkpoints_steps=100000 \
             "${one_thread[@]}" 2>&1 |
           sed -n 's/.*global_step\/sec: \([0-9.]*\).*/\1/p' | tail -n +2 |
           awk '{ s += $1; n++ } END { if (n) printf "%.0f", 40 * s / n }')
    rm -rf "$dir"
    peer=$("$python" "$here/census_peer.py" --data "$here/../../data/adult" --model "$m" \
             --steps "$steps" --warmup 200 --threads 1)
    prate=$(echo "$peer" | sed -n 's/.*examples_per_second=\([0-9.]*\).*/\1/p')
    share_peer="$share_peer $(echo "$peer" | sed -n 's/.*pipeline_share=\([0-9.]*\).*/\1/p')"
    ours="$ours $rate" theirs="$theirs $prate"
    ratios="$ratios $(awk -v a="$rate" -v b="$prate" 'BEGIN { printf "%.2f", a / b }')"
  done
  o=$(echo "$ours" | median) t=$(echo "$theirs" | median)
  input=$(OMP_NUM_THREADS=1 "$build/tests/bench/input_bench" --config "$configs/census_$m.toml" \
            "${one_thread[@]}" --steps 20000 --warmup 1000)
  us=$(echo "$input" | sed -n 's/.*us_per_batch=\([0-9.]*\).*/\1/p')
  isa=$(echo "$input" | sed -n 's/.*isa=\([a-z0-9_]*\).*/\1/p')
  echo "census_$m threads=1 tandem=$o pytorch=$t ratio=$(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.2f", a / b }')" \
       "ratio_range=$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -g | head -1)-$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -g | tail -1)" \
       "tandem_pipeline_share=$(awk -v u="$us" -v r="$o" 'BEGIN { printf "%.3f", u * r / 40 / 1e6 }')" \
       "pytorch_pipeline_share=$(echo "$share_peer" | median) examples/s isa=$isa"
done
