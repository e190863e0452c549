#!/usr/bin/env bash
# Where the collective strategy's scaling efficiency goes on this machine: one model
# (default fashion_cnn float32, one thread per process), its step time per step
# (run.log_step_count_steps = 1) in four runs of STEPS steps, in one invocation:
#
#   local      one `trainer train`
#   two_local  two independent `trainer train` at once: what sharing the machine's
#              cores (and caches, memory bandwidth) between two processes costs
#   collective `trainer launch --ps 0 --workers 1` (two replicas), the chief's steps
#   wire       build/tests/bench/collective_bench: the all-reduce of the model's
#              gradient bytes alone, between two members over loopback gRPC
#
# and prints the efficiency (local step / collective step: each collective step
# trains twice the local batch) as a product of its shares:
#
#   cores     local step / two_local step
#   slower    two_local step / E[max of the two replicas' step]: a synchronous step
#             waits for the slower replica (pairs of two_local steps, one from each
#             process, step i with step i+k for every shift k)
#   wire      E[max] / (E[max] + all-reduce)
#   runtime   (E[max] + all-reduce) / collective step: what is left, the collective
#             strategy's own copies, hand-offs and scheduling, and the all-reduce
#             competing with the backward pass for the cores (above 1: the all-reduce
#             hidden behind the backward pass more than it costs)
#
# and the floor, the efficiency with runtime = 1 (the all-reduce after the step, at
# its own speed), and the ceiling, cores x slower (the all-reduce hidden entirely). Medians over the steps after the
# first fifth. TANDEM_ACCOUNT_REPS (default 3) alternating repetitions; the printed
# shares are the medians over them.
#
#   tests/bench/collective_accounting.sh [build-dir]
#   env: MODEL (fashion_cnn), PRECISION (float32), STEPS (150), GRAD_MIB (12.5: the
#        model's gradient bytes), TANDEM_DATA_DIR
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
trainer="$build/apps/trainer"
MODEL=${MODEL:-fashion_cnn}
PRECISION=${PRECISION:-float32}
STEPS=${STEPS:-150}
GRAD_MIB=${GRAD_MIB:-12.5}
reps=${TANDEM_ACCOUNT_REPS:-3}
[[ -x "$trainer" && -x "$build/tests/bench/collective_bench" ]] ||
  { echo "build $trainer and $build/tests/bench/collective_bench first"; exit 1; }
cpus=$(nproc)
export OMP_NUM_THREADS=1
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $cpus cpus;" \
     "model=$MODEL precision=$PRECISION steps=$STEPS"
common=(--config "$here/../../configs/$MODEL.toml" --set train.max_steps="$STEPS"
        --set run.log_step_count_steps=1 --set run.precision="\"$PRECISION\""
        --set run.save_checkpoints_steps=$((STEPS * 10))
        --set run.intra_op_threads=1 --set run.inter_op_threads=1)
if [[ -n "${TANDEM_DATA_DIR:-}" ]]; then common+=(--set data.data_dir="\"$TANDEM_DATA_DIR\""); fi

# step_ms [PREFIX] < LOG: one step time in ms per line (1000 / global_step/sec), the
# lines of PREFIX only, after the first fifth of the run.
step_ms() {
  awk -v prefix="${1:-}" -v skip=$((STEPS / 5)) '
    index($0, prefix) == 1 && match($0, /global_step\/sec: [0-9.]+/) {
      v = substr($0, RSTART + 17, RLENGTH - 17)
      if (++n > skip && v > 0) printf "%.4f\n", 1000 / v
    }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# expected_max FILE_A FILE_B: the mean over every shift k of the mean of
# max(a[i], b[i + k]).
expected_max() {
  awk 'NR == FNR { a[n++] = $1; next } { b[m++] = $1 }
       END {
         if (n == 0 || m == 0) exit
         len = n < m ? n : m
         for (k = 0; k < len; k++) for (i = 0; i < len; i++) {
           x = a[i]; y = b[(i + k) % len]; s += (x > y ? x : y); c++
         }
         printf "%.4f\n", s / c
       }' "$1" "$2"
}
train() {  # train NAME: a local run into $work/NAME.log, in the background
  mkdir -p "$work/$1"
  "$trainer" train "${common[@]}" --set run.model_dir="\"$work/$1\"" >"$work/$1.log" 2>&1 &
  pids+=($!)
}

declare -a eff cores slower wire runtime floor ceiling
for ((r = 1; r <= reps; r++)); do
  rm -rf "$work"/*
  train local; wait "${pids[-1]}"
  t_local=$(step_ms < "$work/local.log" | median)
  train a; train b; wait "${pids[-1]}"; wait "${pids[-2]}"
  step_ms < "$work/a.log" > "$work/a.ms"; step_ms < "$work/b.log" > "$work/b.ms"
  t_two=$(cat "$work/a.ms" "$work/b.ms" | median)
  t_max=$(expected_max "$work/a.ms" "$work/b.ms")
  mkdir -p "$work/coll"
  "$trainer" launch --ps 0 --workers 1 --command train "${common[@]}" \
    --set run.model_dir="\"$work/coll\"" >"$work/coll.log" 2>&1 &
  pids+=($!); wait "${pids[-1]}"
  t_coll=$(step_ms '[chief:0]' < "$work/coll.log" | median)
  # Three rounds (the median): a first round pays for connecting and warming up.
  t_ar=$("$build/tests/bench/collective_bench" --mib "$GRAD_MIB" --reps 10 --rounds 3 2>/dev/null |
         sed -n 's/^allreduce .*: \([0-9.]*\) ms.*/\1/p' | head -1)
  [[ -n "$t_local" && -n "$t_two" && -n "$t_max" && -n "$t_coll" && -n "$t_ar" ]] ||
    { echo "a run gave no step times; logs:"; tail -5 "$work"/*.log; exit 1; }
  line=$(awk -v l="$t_local" -v t="$t_two" -v m="$t_max" -v c="$t_coll" -v w="$t_ar" 'BEGIN {
    printf "%.4f %.4f %.4f %.4f %.4f %.4f %.4f", l / c, l / t, t / m, m / (m + w), (m + w) / c,
           l / (m + w), l / m }')
  read -r e1 c1 s1 w1 r1 f1 x1 <<< "$line"
  eff+=("$e1") cores+=("$c1") slower+=("$s1") wire+=("$w1") runtime+=("$r1") floor+=("$f1")
  ceiling+=("$x1")
  echo "rep $r: step ms local=$t_local two_local=$t_two expected_max=$t_max allreduce=$t_ar" \
       "collective=$t_coll efficiency=$e1 cores=$c1 slower=$s1 wire=$w1 runtime=$r1 floor=$f1"
done
m() { printf '%s\n' "$@" | median; }
echo "collective_accounting model=$MODEL precision=$PRECISION efficiency=$(m "${eff[@]}")" \
     "floor=$(m "${floor[@]}") ceiling=$(m "${ceiling[@]}") shares: cores=$(m "${cores[@]}") slower=$(m "${slower[@]}")" \
     "wire=$(m "${wire[@]}") runtime=$(m "${runtime[@]}")"
