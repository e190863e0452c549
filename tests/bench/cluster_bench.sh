#!/usr/bin/env bash
# Cluster benchmark: aggregate training examples/s of configs/fashion_mlp.toml
# (784-256-128-100-10, Adam, batch 128 per replica) three ways, in one invocation:
#   local    one `trainer train` process;
#   cluster  `trainer launch --ps 1 --workers 1`: a chief, 1 worker and 1 ps as separate
#            processes on 127.0.0.1 (two replicas training, the ps holding the variables);
#   ddp      PyTorch DistributedDataParallel with 2 processes (tests/bench/ddp_peer.py);
# then the ratios cluster/local and cluster/ddp (above 1: the cluster is faster).
# Threads: every tandem process gets 1 intra-op and 1 inter-op thread
# (--set run.intra_op_threads=1 --set run.inter_op_threads=1) and OMP_NUM_THREADS=1, and
# every DDP process 1 thread (OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1, --threads 1), so
# each replica computes on one thread in all three (the cluster's ps process comes on top).
# tandem's rate is the mean of the StepCounterHook's `global_step/sec: X` log lines after
# the first (which spans start-up), times the batch size, as in run.sh; in the cluster
# only the chief's lines (prefixed "[chief:0]" by `launch`) count: its global step counts
# the steps of every replica, so that is already the aggregate rate.
# Every command runs under `timeout` (TIMEOUT_S each) and whatever it leaves running in
# its process group is killed after it.
# Usage: tests/bench/cluster_bench.sh [build-dir]
#   env: STEPS (trainer steps, default 1500, at least 3 * log_step_count_steps = 300),
#        PEER_STEPS (DDP timed steps per process, default 500), TIMEOUT_S (default 600),
#        TANDEM_DATA_DIR (Fashion-MNIST IDX directory for both).
#   (needs: the trainer built; for the peer, scripts/install-deps.sh --bench)
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
trainer="$build/apps/trainer"
config="$here/../../configs/fashion_mlp.toml"
peer="$here/ddp_peer.py"
STEPS=${STEPS:-1500}
PEER_STEPS=${PEER_STEPS:-500}
TIMEOUT_S=${TIMEOUT_S:-600}
BATCH=128  # [train] batch_size of configs/fashion_mlp.toml.
CHIEF_PREFIX='[chief:0]'

[[ -x "$trainer" ]] || { echo "build $trainer first (cmake --build $build --target trainer)"; exit 1; }
(( STEPS >= 300 )) || { echo "STEPS=$STEPS: need at least 300 for two global_step/sec lines after the first"; exit 1; }

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
common=(--config "$config" --set train.max_steps="$STEPS"
        --set run.intra_op_threads=1 --set run.inter_op_threads=1)
# The config names its data_dir, so $TANDEM_DATA_DIR only reaches the trainer this way.
if [[ -n "${TANDEM_DATA_DIR:-}" ]]; then common+=(--set data.data_dir="\"$TANDEM_DATA_DIR\""); fi

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

# examples_rate STEPS_PER_SEC: examples/s at BATCH examples per step.
examples_rate() {
  awk -v s="$1" -v b="$BATCH" 'BEGIN { printf "%.0f\n", s * b }'
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

# trainer_rate NAME PREFIX SUBCOMMAND ARGS...: runs the trainer with a fresh model_dir
# (removed after) and sets `rate` to its aggregate examples/s, or to "" if it failed.
trainer_rate() {
  local name=$1 prefix=$2 log="$work/$1.log" dir="$work/$1_model" rc=0 steps
  shift 2
  rate=""
  mkdir "$dir"
  bounded "$log" "$trainer" "$@" "${common[@]}" --set run.model_dir="\"$dir\"" || rc=$?
  rm -rf "$dir"
  steps=$(mean_step_rate "$prefix" <"$log")
  if (( rc != 0 )) || [[ -z "$steps" ]]; then
    failed "$name" "$rc" "$log"
  else
    rate=$(examples_rate "$steps")
  fi
}

trainer_rate local "" train
local_eps=$rate
echo "local trainer (1 process): examples_per_second=${local_eps:-failed}"
trainer_rate cluster "$CHIEF_PREFIX" launch --ps 1 --workers 1
cluster_eps=$rate
echo "cluster (chief + 1 worker + 1 ps): examples_per_second=${cluster_eps:-failed}"

ddp_eps=""
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  # The peer's own deadline comes before timeout's, so it reports and cleans up itself.
  peer_args=(--procs 2 --threads 1 --batch "$BATCH" --steps "$PEER_STEPS" --warmup 20
             --timeout $((TIMEOUT_S > 60 ? TIMEOUT_S - 30 : TIMEOUT_S)))
  rc=0
  bounded "$work/ddp.log" /usr/bin/python3 "$peer" "${peer_args[@]}" || rc=$?
  ddp_eps=$(sed -n 's/^ddp procs=.* examples_per_second=\([0-9.]*\).*/\1/p' "$work/ddp.log")
  if (( rc != 0 )) || [[ -z "$ddp_eps" ]]; then
    failed ddp "$rc" "$work/ddp.log"
    ddp_eps=""
  fi
  echo "ddp (2 processes, 1 thread each): examples_per_second=${ddp_eps:-failed}"
else
  echo "ddp: PyTorch peer missing (no python3-torch: scripts/install-deps.sh --bench); skipped"
fi

echo "cluster_vs_local=$(ratio "$cluster_eps" "$local_eps") cluster_vs_ddp=$(ratio "$cluster_eps" "$ddp_eps")"
[[ -n "$local_eps" && -n "$cluster_eps" ]]  # exit status 1 if a tandem run failed.
