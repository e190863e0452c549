#!/usr/bin/env bash
# Runs tandem's benchmarks next to the PyTorch peer in one invocation and prints the
# ratio tandem / PyTorch for each configuration (higher is better for tandem). tandem
# runs one op at a time with all threads inside it (--inter_op 1), as PyTorch does.
# Usage: tests/bench/run.sh [build-dir] [--e2e]   (needs: scripts/install-deps.sh --bench)
#   --e2e: only the end-to-end trainer and Estimator-overhead figures.
# The CNN and end-to-end rows alternate tandem and PyTorch TANDEM_BENCH_REPS times
# (default 3) and report the median of each side, their ratio, and the range of the
# pairs' ratios: on a shared VM one pair can be 10% off either way.
set -euo pipefail
build=${1:-build}
bench="$build/tests/bench/train_bench"
peer="$(dirname "$0")/torch_peer.py"
# PYTHON: the interpreter with torch (default /usr/bin/python3, Debian's python3-torch).
python=${PYTHON:-/usr/bin/python3}
[[ -x "$bench" ]] || { echo "build $bench first (cmake --build $build --target train_bench)"; exit 1; }
have_peer=1
"$python" -c "import torch" 2>/dev/null || { have_peer=0; echo "no python3-torch: tandem figures only"; }
source "$(dirname "$0")/peer_blas.sh"
if (( have_peer )); then peer_blas "$python"; fi

rate() { sed -n 's/.*examples_per_second=\([0-9.]*\).*/\1/p'; }
reps=${TANDEM_BENCH_REPS:-3}
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# ratios A_LIST B_LIST: each pair's ratio A/B, one per line, smallest first.
ratios() {
  paste <(echo "$1" | tr ' ' '\n' | sed '/^$/d') <(echo "$2" | tr ' ' '\n' | sed '/^$/d') |
    awk '{ printf "%.4f\n", $1 / $2 }' | sort -g
}
# paired OURS_LIST THEIRS_LIST: "tandem=M pytorch=M ratio=R ratio_range=LO-HI" over the
# pairs, or "tandem=M" without the peer.
paired() {
  local o t r
  if (( ! have_peer )); then
    echo "tandem=$(echo "$1" | median)"
    return
  fi
  o=$(echo "$1" | median)
  t=$(echo "$2" | median)
  r=$(ratios "$1" "$2")
  awk -v o="$o" -v t="$t" -v lo="$(echo "$r" | head -1)" -v hi="$(echo "$r" | tail -1)" \
    'BEGIN { printf "tandem=%.0f pytorch=%.0f ratio=%.2f ratio_range=%.2f-%.2f", o, t, o / t, lo, hi }'
}
# pair_ratios A_LIST B_LIST NAME: "NAME=M NAME_range=LO-HI", the median and range of the
# pairs' ratios A/B (each pair ran back to back, so the host's drift between pairs
# cancels in its ratio).
pair_ratios() {
  local r
  r=$(ratios "$1" "$2")
  awk -v m="$(echo "$r" | median)" -v lo="$(echo "$r" | head -1)" -v hi="$(echo "$r" | tail -1)" \
    -v n="$3" 'BEGIN { printf "%s=%.2f %s_range=%.2f-%.2f", n, m, n, lo, hi }'
}
# peer_best THREADS ARGS...: the PyTorch peer's best rate of two BLAS settings
# (OpenBLAS's own threads can fight PyTorch's OpenMP threads, so give it the faster).
# TANDEM_BENCH_PEER_BF16_STEPS=N caps the peer's timed mixed_bfloat16 steps at N and its
# warm-up at N/5 (at least 1): PyTorch's bfloat16 autocast on a CPU without bfloat16
# instructions takes seconds per CNN step (the full run would take hours), and a rate
# over fewer steps of a steady loop is still its rate.
peer_best() {
  local threads=$1 best=0 r cap=${TANDEM_BENCH_PEER_BF16_STEPS:-0} steps=0 warmup=10 a ob
  shift
  local -a args=("$@")
  for ((a = 0; a + 1 < ${#args[@]}; a++)); do
    [[ "${args[a]}" == --steps ]] && steps=${args[a + 1]}
    [[ "${args[a]}" == --warmup ]] && warmup=${args[a + 1]}
    [[ "${args[a]}" == --precision && "${args[a + 1]}" != mixed_bfloat16 ]] && cap=0
  done
  if ((cap > 0 && steps > cap)); then
    local w=$((cap / 5))
    ((w < 1)) && w=1
    ((w > warmup)) && w=$warmup
    args+=(--steps "$cap" --warmup "$w")  # argparse keeps the last of each
  fi
  for ob in 1 "$threads"; do
    r=$(OPENBLAS_NUM_THREADS=$ob OMP_NUM_THREADS=$threads "$python" "$peer" --threads "$threads" "${args[@]}" | rate)
    best=$(awk -v a="$best" -v b="$r" 'BEGIN { print (b > a) ? b : a }')
  done
  echo "$best"
}
if [[ "${2:-}" != "--e2e" ]]; then
for threads in 1 2; do
  # This CPU's oneDNN matmul peak per precision: each step row reports its fraction of it
  # (of_gemm_peak) and of the peak measured again in the step's own process, with the
  # step's floor there (products at that peak plus the Adam update's memory traffic).
  peak=$(OMP_NUM_THREADS=$threads "$bench" --model gemm_peak --threads "$threads")
  echo "$peak"
  for cfg in "mlp 128 300" "cnn 100 50"; do
    set -- $cfg
    for precision in float32 mixed_bfloat16; do
      n=$([[ "$1" == cnn ]] && echo "$reps" || echo 1)
      oursl="" theirsl="" gflopsl="" sharel="" atl="" ceill="" interl=""
      for ((i = 0; i < n; i++)); do
        out=$(OMP_NUM_THREADS=$threads "$bench" --model "$1" --threads "$threads" --batch "$2" \
              --steps "$3" --precision "$precision" --floor --peak_rounds 5 2>/dev/null)
        oursl="$oursl $(echo "$out" | rate)"
        gflopsl="$gflopsl $(echo "$out" | sed -n 's/^tandem .*gflops=\([0-9.]*\).*/\1/p')"
        sharel="$sharel $(echo "$out" | sed -n 's/^floor .*peak_share=\([0-9.]*\).*/\1/p')"
        atl="$atl $(echo "$out" | sed -n 's/^floor .*step_at_floor=\([0-9.]*\).*/\1/p')"
        ceill="$ceill $(echo "$out" | sed -n 's/^floor .*peak_share_ceiling=\([0-9.]*\).*/\1/p')"
        interl="$interl $(echo "$out" | sed -n 's/^interleaved_peak .*share_median=\([0-9.]*\).*/\1/p')"
        if (( have_peer )); then
          theirsl="$theirsl $(peer_best "$threads" --model "$1" --batch "$2" --steps "$3" --precision "$precision")"
        fi
      done
      line="$1 batch=$2 threads=$threads precision=$precision $(paired "$oursl" "$theirsl")"
      key=$([[ "$precision" == float32 ]] && echo f32_gflops || echo bf16_gflops)
      gflops=$(echo "$gflopsl" | median)
      top=$(echo "$peak" | sed -n "s/.*$key=\([0-9.]*\).*/\1/p")
      line="$line gflops=$gflops of_gemm_peak=$(awk -v a="$gflops" -v b="$top" 'BEGIN { printf "%.2f", a / b }')"
      # The same step against the peak measured in its own process (before and after
      # its steps, the higher), and against its floor there (train_bench --floor),
      # medians over the runs.
      line="$line of_peak_in_process=$(echo "$sharel" | median) step_at_floor=$(echo "$atl" | median)"
      # And against the peak's product alternated with its steps, as many steps as one
      # product takes (train_bench --peak_rounds: the same weather for both), the median
      # of the rounds.
      line="$line of_peak_interleaved=$(echo "$interl" | median)"
      echo "$line peak_share_ceiling=$(echo "$ceill" | median) examples/s"
    done
  done
done
# A long MLP run, with denormal floats flushed (the default) and kept
# (TANDEM_KEEP_DENORMALS=1): the first and the last tenth of each run show a step that
# slows down as training pushes gradients and Adam moments below 1.2e-38.
for keep in 0 1; do
  out=$(TANDEM_KEEP_DENORMALS=$keep OMP_NUM_THREADS=1 "$bench" --model mlp --threads 1 --batch 128 \
        --steps 6000 2>/dev/null)
  echo "mlp long run threads=1 keep_denormals=$keep $(echo "$out" | sed -n 's/.*\(examples_per_second=.*\)/\1/p')"
done
# The MatMul kernel against bare oneDNN, and the MLP step's ceiling: its products alone
# at bare oneDNN speed, with hot caches and with each product's operands out of cache.
for threads in 1 2; do
  OMP_NUM_THREADS=$threads "$bench" --model matmul --threads "$threads" 2>/dev/null | tail -3
done
# The two intra-op loop mechanisms (kernels/cpu/parallel.h), one and four callers.
OMP_NUM_THREADS=2 "$bench" --model parallel_for --threads 2
fi

# End to end: `trainer train` on the shipped configs (input pipeline, hooks, summaries
# and checkpoints included) against the PyTorch loop over a shuffled DataLoader with
# the same model, optimizer and batch. Like the steps above, tandem runs one op at a
# time with all threads inside it (inter_op_threads = 1), on the CPU (num_gpus = 0).
# tandem's rate is the mean of the StepCounterHook's global_step/sec lines after the
# first, times the batch size.
#   fashion_mlp (784-256-128-100-10, Adam, batch 128) in float32;
#   fashion_cnn (batch 100) in float32 and mixed_bfloat16 (PyTorch: autocast bf16).
trainer="$build/apps/trainer"
configs="$(dirname "$0")/../../configs"
# e2e NAME BATCH STEPS PRECISION THREADS: also times train_bench's bare step of the same
# model, batch, threads and number of steps in each pair (so both see the host's
# weather for as long), and prints e2e_over_step, the median over the pairs of the share
# of the step's speed that the trainer keeps end to end (input pipeline, hooks,
# summaries), and the pairs' range.
e2e() {
  local name=$1 batch=$2 steps=$3 precision=$4 threads=$5 dir rate oursl="" theirsl="" stepl="" i
  for ((i = 0; i < reps; i++)); do
    dir=$(mktemp -d)
    rate=$(OMP_NUM_THREADS=$threads "$trainer" train --config "$configs/$name.toml" \
        --set run.model_dir="\"$dir\"" --set train.max_steps="$steps" \
        --set run.precision="\"$precision\"" --set run.save_checkpoints_steps=100000 \
        --set run.inter_op_threads=1 --set run.intra_op_threads="$threads" --set run.num_gpus=0 2>&1 |
      sed -n 's/.*global_step\/sec: \([0-9.]*\).*/\1/p' | tail -n +2 | awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n }')
    rm -rf "$dir"
    oursl="$oursl $(awk -v s="$rate" -v b="$batch" 'BEGIN { printf "%.0f", s * b }')"
    stepl="$stepl $(OMP_NUM_THREADS=$threads "$bench" --model "${name#fashion_}" --threads "$threads" \
        --batch "$batch" --steps "$steps" --precision "$precision" 2>/dev/null | rate)"
    if (( have_peer )); then
      theirsl="$theirsl $(peer_best "$threads" --model "${name}_e2e" --batch "$batch" --steps 200 \
                          --warmup 20 --precision "$precision")"
    fi
  done
  echo "trainer $name e2e threads=$threads precision=$precision $(paired "$oursl" "$theirsl")" \
    "$(pair_ratios "$oursl" "$stepl" e2e_over_step) examples/s"
}
# TANDEM_BENCH_E2E: the rows to run, as MODEL:PRECISION:THREADS (default: all six).
rows=${TANDEM_BENCH_E2E:-"fashion_mlp:float32:1 fashion_cnn:float32:1 fashion_cnn:mixed_bfloat16:1
  fashion_mlp:float32:2 fashion_cnn:float32:2 fashion_cnn:mixed_bfloat16:2"}
for row in $rows; do
  IFS=: read -r name precision threads <<<"$row"
  if [[ "$name" == fashion_mlp ]]; then
    e2e fashion_mlp 128 1500 "$precision" "$threads"
  else
    e2e fashion_cnn 100 500 "$precision" "$threads"
  fi
done
config="$configs/fashion_mlp.toml"
# The Estimator's own cost: Estimator::Train vs a bare DirectSession loop, same model.
for threads in 1 2; do
  OMP_NUM_THREADS=$threads "$build/tests/bench/estimator_bench" --config "$config" --threads "$threads"
done
# The input pipeline alone, and its gather of shuffled rows from the allocator's huge
# pages against a copy in small pages (small_over_huge near 1: the huge pages are gone).
"$build/tests/bench/estimator_bench" --config "$config" --only pipeline --steps 5000

# The distributed runtime: RecvTensor vs raw TCP, and the 1 ps + 1 worker MLP step vs
# DirectSession (no PyTorch peer).
if [[ "${2:-}" != "--e2e" && -x "$build/tests/bench/distributed_bench" ]]; then
  "$build/tests/bench/distributed_bench" --threads 2
fi

# The REST predict server (`trainer serve_model`): requests/s and latency over HTTP with
# and without batching, against ExportedModel::Predict in process (no PyTorch peer).
if [[ "${2:-}" != "--e2e" && -x "$build/tests/bench/serving_bench" ]]; then
  "$build/tests/bench/serving_bench" --model cnn --seconds 5
fi
