#!/usr/bin/env bash
# Cluster benchmark: aggregate training examples/s of the stock models on this machine,
# for each model (MODELS, default "fashion_mlp fashion_cnn") and precision (PRECISIONS,
# default "float32 mixed_bfloat16"), five ways, alternating in PAIRS rounds (default 3)
# so that drift hits every row alike; each row reports the median and its rounds:
#   local       one `trainer train` process;
#   collective  `trainer launch --ps 0 --workers 1`: two replicas with collective
#               all-reduce ([distribute] strategy "auto" without ps tasks);
#   ps_async    `trainer launch --ps 1 --workers 1`: two replicas and a parameter server;
#   ps_sync     the same with distribute.sync=true (synchronous replicas through the ps);
#   ddp         PyTorch DistributedDataParallel, 2 processes (gloo), the same model and
#               per-replica batch (tests/bench/ddp_peer.py), autocast for mixed_bfloat16;
# then, per model and precision: scaling efficiency = collective / (2 x local), and
# collective / ddp, ps_async / local, ps_sync / local.
# Threads: every tandem process gets 1 intra-op and 1 inter-op thread and
# OMP_NUM_THREADS=1, every DDP process 1 thread, so each replica computes on one thread
# (a ps process comes on top).
# tandem's rate is the mean of the StepCounterHook's `global_step/sec: X` lines after the
# first (which spans start-up), from the chief's lines on a cluster ("[chief:0]"), times
# the examples one global step stands for: the batch (local, ps_async: every replica's
# step is a global step), or 2 x the batch (collective, ps_sync: a global step is one
# synchronous step of both replicas).
# Every command runs under `timeout` (TIMEOUT_S each) and whatever it leaves running in
# its process group is killed after it.
# Usage: tests/bench/cluster_bench.sh [build-dir]
#   env: MODELS, PRECISIONS, PAIRS (above); MLP_STEPS (default 1500), CNN_STEPS (default
#        300): trainer steps per run, logged every fifth; PEER_STEPS_MLP (default 500),
#        PEER_STEPS_CNN (default 100): DDP timed steps per process; TIMEOUT_S (default
#        600); TANDEM_DATA_DIR (Fashion-MNIST IDX directory for both).
#   (needs: the trainer built; for the peer, scripts/install-deps.sh --bench)
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
trainer="$build/apps/trainer"
peer="$here/ddp_peer.py"
MODELS=${MODELS:-"fashion_mlp fashion_cnn"}
PRECISIONS=${PRECISIONS:-"float32 mixed_bfloat16"}
PAIRS=${PAIRS:-3}
MLP_STEPS=${MLP_STEPS:-1500}
CNN_STEPS=${CNN_STEPS:-300}
PEER_STEPS_MLP=${PEER_STEPS_MLP:-500}
PEER_STEPS_CNN=${PEER_STEPS_CNN:-100}
TIMEOUT_S=${TIMEOUT_S:-600}
CHIEF_PREFIX='[chief:0]'

[[ -x "$trainer" ]] || { echo "build $trainer first (cmake --build $build --target trainer)"; exit 1; }

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
have_torch=0
if /usr/bin/python3 -c "import torch" 2>/dev/null; then have_torch=1; fi
source "$here/peer_blas.sh"
if (( have_torch )); then peer_blas /usr/bin/python3; fi

work=$(mktemp -d)
group=""  # process group of the command running now, for the exit trap
cleanup() {
  if [[ -n "$group" ]]; then
    kill -TERM -- "-$group" 2>/dev/null && sleep 2
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# bounded LOG CMD...: runs CMD (stdout and stderr to LOG) for at most TIMEOUT_S seconds,
# then kills anything it left running in its process group; returns CMD's exit status
# (124: timed out). timeout(1) puts itself and CMD in a new process group whose id is
# timeout's pid. Call it from the main shell (not in $(...)) so the exit trap sees $group.
bounded() {
  local log=$1 rc=0
  shift
  timeout -k 10 "$TIMEOUT_S" "$@" >"$log" 2>&1 &
  group=$!
  wait "$group" || rc=$?
  # Give helpers a moment to exit (PyTorch's resource tracker ends just after the peer).
  local tries=0
  while [[ -n "$(group_members "$group")" ]] && (( tries++ < 10 )); do sleep 0.3; done
  if [[ -n "$(group_members "$group")" ]]; then
    echo "warning: $* left processes running; killing them:" >&2
    group_members "$group" | sed 's/^/  /' >&2
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  group=""
  return "$rc"
}

# group_members PGID: the live (not zombie) processes of process group PGID, one a line.
group_members() {
  ps -eo pgid=,stat=,pid=,args= | awk -v g="$1" '$1 == g && $2 !~ /^Z/'
}

# mean_step_rate [PREFIX] < LOG: the mean of the `global_step/sec: X` values after the
# first, of the lines that start with PREFIX (all lines if PREFIX is empty); prints
# nothing when there are fewer than two such lines.
mean_step_rate() {
  awk -v prefix="${1:-}" '
    {
      line = $0
      sub(/^[ \t]+/, "", line)
      if (prefix != "" && index(line, prefix) != 1) next
      at = index(line, "global_step/sec: ")
      if (at == 0) next
      v = substr(line, at + length("global_step/sec: "))
      sub(/[^0-9.eE+-].*$/, "", v)
      if (v !~ /^[0-9.]+([eE][+-]?[0-9]+)?$/) next  # inf, nan: skip.
      if (seen++ == 0) next  # the first interval includes start-up.
      sum += v
      n++
    }
    END { if (n > 0) printf "%.4f\n", sum / n }'
}

# examples_rate STEPS_PER_SEC EXAMPLES_PER_STEP: examples/s.
examples_rate() {
  awk -v s="$1" -v b="$2" 'BEGIN { printf "%.0f\n", s * b }'
}

# median A B ...: the median of the numbers given (the lower middle one for an even
# count), or nothing when none is.
median() {
  printf '%s\n' "$@" | awk 'NF' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}

# ratio A B: A / B with two decimals, or n/a when either is missing.
ratio() {
  if [[ -n "$1" && -n "$2" ]]; then
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "n/a" }'
  else
    echo n/a
  fi
}

# failed NAME RC LOG: explains on stderr why a run gave no figure.
failed() {
  local why="exit status $2"
  if (( $2 == 124 || $2 == 137 )); then why="timed out after ${TIMEOUT_S}s"; fi
  if (( $2 == 0 )); then why="no rate in its log"; fi
  { echo "$1: failed ($why); last lines of its log:"
    tail -n 15 "$3" | sed 's/^/  /'; } >&2
}

# trainer_rate NAME PREFIX EXAMPLES_PER_STEP SUBCOMMAND ARGS...: runs the trainer with a
# fresh model_dir (removed after) and the run's common flags, and sets `rate` to its
# aggregate examples/s, or to "" if it failed.
trainer_rate() {
  local name=$1 prefix=$2 per_step=$3 log="$work/$1.log" dir="$work/$1_model" rc=0 steps
  shift 3
  rate=""
  mkdir "$dir"
  bounded "$log" "$trainer" "$@" "${common[@]}" --set run.model_dir="\"$dir\"" || rc=$?
  rm -rf "$dir"
  steps=$(mean_step_rate "$prefix" <"$log")
  if (( rc != 0 )) || [[ -z "$steps" ]]; then
    failed "$name" "$rc" "$log"
  else
    rate=$(examples_rate "$steps" "$per_step")
  fi
}

# ddp_rate MODEL PRECISION BATCH STEPS: sets `rate` to DDP's aggregate examples/s, or "".
ddp_rate() {
  rate=""
  (( have_torch )) || return 0
  local rc=0
  # The peer's own deadline comes before timeout's, so it reports and cleans up itself.
  local args=(--procs 2 --threads 1 --model "$1" --precision "$2" --batch "$3" --steps "$4"
              --warmup 10 --timeout $((TIMEOUT_S > 60 ? TIMEOUT_S - 30 : TIMEOUT_S)))
  bounded "$work/ddp.log" /usr/bin/python3 "$peer" "${args[@]}" || rc=$?
  rate=$(sed -n 's/^ddp procs=.* examples_per_second=\([0-9.]*\).*/\1/p' "$work/ddp.log")
  if (( rc != 0 )) || [[ -z "$rate" ]]; then
    failed ddp "$rc" "$work/ddp.log"
    rate=""
  fi
}

(( have_torch )) || echo "ddp: PyTorch peer missing (no python3-torch: scripts/install-deps.sh --bench); skipped"
rows=(local collective ps_async ps_sync ddp)
status=0
for model in $MODELS; do
  case $model in
    fashion_mlp) batch=128; steps=$MLP_STEPS; peer_steps=$PEER_STEPS_MLP ;;
    fashion_cnn) batch=100; steps=$CNN_STEPS; peer_steps=$PEER_STEPS_CNN ;;
    *) echo "unknown model $model"; exit 2 ;;
  esac
  (( steps >= 15 )) || { echo "$model: need at least 15 steps"; exit 2; }
  for precision in $PRECISIONS; do
    common=(--config "$here/../../configs/$model.toml" --set train.max_steps="$steps"
            --set run.log_step_count_steps=$((steps / 5)) --set run.precision="\"$precision\""
            --set run.save_checkpoints_steps=$((steps * 10))
            --set run.intra_op_threads=1 --set run.inter_op_threads=1)
    if [[ -n "${TANDEM_DATA_DIR:-}" ]]; then common+=(--set data.data_dir="\"$TANDEM_DATA_DIR\""); fi
    declare -A got=()
    for (( round = 1; round <= PAIRS; round++ )); do
      trainer_rate local "" "$batch" train; got[local]+=" $rate"
      trainer_rate collective "$CHIEF_PREFIX" $((2 * batch)) launch --command train --ps 0 --workers 1
      got[collective]+=" $rate"
      trainer_rate ps_async "$CHIEF_PREFIX" "$batch" launch --command train --ps 1 --workers 1
      got[ps_async]+=" $rate"
      trainer_rate ps_sync "$CHIEF_PREFIX" $((2 * batch)) launch --command train --ps 1 --workers 1 \
        --set distribute.sync=true
      got[ps_sync]+=" $rate"
      ddp_rate "$model" "$precision" "$batch" "$peer_steps"; got[ddp]+=" $rate"
    done
    declare -A med=()
    for row in "${rows[@]}"; do
      # shellcheck disable=SC2086
      med[$row]=$(median ${got[$row]})
      echo "$model $precision $row: examples_per_second=${med[$row]:-failed} (rounds:${got[$row]:- none})"
    done
    if [[ -n "${med[local]}" ]]; then
      echo "$model $precision scaling_efficiency=$(ratio "${med[collective]}" "$((2 * med[local]))")" \
           "collective_vs_ddp=$(ratio "${med[collective]}" "${med[ddp]}")" \
           "ps_async_vs_local=$(ratio "${med[ps_async]}" "${med[local]}")" \
           "ps_sync_vs_local=$(ratio "${med[ps_sync]}" "${med[local]}")"
    fi
    [[ -n "${med[local]}" && -n "${med[collective]}" ]] || status=1
    unset got med
  done
done
exit "$status"
