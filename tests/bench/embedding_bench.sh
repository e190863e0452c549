#!/usr/bin/env bash
# A large embedding table on parameter servers (tests/bench/ctr_bench.toml: a DNN
# classifier over lists of 8 Zipf-distributed item ids hashed into 2^22 buckets,
# embedded in 16 dimensions, batch 256), against the same model with a table 1000 times
# smaller and against a PyTorch peer (ctr_peer.py), in one invocation. Needs
# scripts/install-deps.sh --bench (python3-torch, python3-numpy).
#
#   tests/bench/embedding_bench.sh [build-dir]
#
# tandem: `trainer launch --ps 2 --workers 2 --no_chief` (two training replicas, the
# table in one part per ps task: `partitioner = "fixed"`, which for the large table is
# what the default gives, so that both tables differ only in size), every task with one
# intra-op and one inter-op thread. Examples/s: the median of the chief's
# global_step/sec lines after the first, times the batch. Bytes per step: every task's
# "rpc sent" total (the RPC layer's count of what it sends), from two runs of
# TANDEM_EMB_STEPS and 3x that many steps, the difference over the difference in
# steps (start-up, variable initialisation and the final checkpoint cancel out). The
# floor per step: 2 x unique ids x 16 x 4 bytes (rows to the worker, gradient rows
# back) + 2 x unique ids x 8 (ids out, gradient indices back), unique ids per batch as
# ctr_data.py counts them (after hashing into the small table: the expected number of
# distinct buckets), plus the dense layers' weights and gradients (2 x 3,329 floats).
# The peers, TANDEM_EMB_STEPS timed steps each: ctr_peer.py, 2 DDP processes over gloo
# (every process holds the whole table), and ctr_ps_peer.py, the table on 2 ps
# processes and 2 workers over torch.distributed.rpc, as tandem's tasks; one thread
# per process. TANDEM_BENCH_REPS (default 3) alternating runs; medians.
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
here="$(cd "$(dirname "$0")" && pwd)"
trainer="$build/apps/trainer"
python=${PYTHON:-/usr/bin/python3}
reps=${TANDEM_BENCH_REPS:-3}
steps=${TANDEM_EMB_STEPS:-1000}  # Runs of 1000 and 3000 steps: the rate climbs over the first few hundred.
big=4194304
small=4194
[[ -x "$trainer" ]] || { echo "build $trainer first"; exit 1; }
"$python" -c "import torch, numpy" 2>/dev/null || { echo "no python3-torch / python3-numpy (scripts/install-deps.sh --bench)"; exit 1; }
source "$here/peer_blas.sh"
peer_blas "$python"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cpus"

work=/tmp/tandem_ctr  # ctr_bench.toml reads its data here.
mkdir -p "$work"
data=$("$python" "$here/ctr_data.py" --out "$work/ctr" --rows 200000 --batch 256)
echo "$data"
unique=$(echo "$data" | sed -n 's/.*unique_ids_per_batch=\([0-9.]*\).*/\1/p')

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run BUCKETS STEPS: prints "<examples/s> <rpc bytes of every task>".
run() {
  local dir log
  dir=$(mktemp -d) log=$(mktemp)
  if ! "$trainer" launch --ps 2 --workers 2 --no_chief --command train \
        --config "$here/ctr_bench.toml" --set features.items.hash_bucket_size="$1" \
        --set train.max_steps="$2" --set run.model_dir="\"$dir\"" \
        --set run.intra_op_threads=1 --set run.inter_op_threads=1 \
        --set distribute.partitioner='"fixed"' >"$log" 2>&1; then
    echo "trainer launch failed; its log:" >&2
    tail -40 "$log" >&2
    rm -rf "$dir" "$log"
    exit 1
  fi
  local rate bytes
  rate=$(grep '^\[worker:0\]' "$log" | sed -n 's/.*global_step\/sec: \([0-9.]*\).*/\1/p' |
         tail -n +2 | median)
  bytes=$(sed -n 's/.*rpc sent: \([0-9]*\) bytes.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
  if [[ "$2" -gt "$steps" && -z "${shown[$1]:-}" ]]; then
    grep -h '^\[worker:0\].*\(Table .* parts\|Tables of\)' "$log" | sed 's/^.*\] /  /' >&2 || true
  fi
  rm -rf "$dir" "$log"
  echo "$(awk -v r="${rate:-0}" 'BEGIN { printf "%.0f", r * 256 }') $bytes"
}

declare -A eps bps shown
for b in $big $small; do eps[$b]="" bps[$b]=""; done
peer="" ps_peer=""
for ((i = 0; i < reps; i++)); do
  for b in $big $small; do
    read -r r1 b1 < <(run "$b" "$steps")
    read -r r3 b3 < <(run "$b" $((3 * steps)))
    shown[$b]=1
    eps[$b]="${eps[$b]} $r3"
    bps[$b]="${bps[$b]} $(awk -v a="$b1" -v c="$b3" -v s="$steps" 'BEGIN { printf "%.0f", (c - a) / (2 * s) }')"
  done
  p=$("$python" "$here/ctr_peer.py" --data "$work/ctr.npz" --buckets $big --steps "$steps")
  peer="$peer $(echo "$p" | sed -n 's/.*examples_per_second=\([0-9.]*\).*/\1/p')"
  p=$("$python" "$here/ctr_ps_peer.py" --data "$work/ctr.npz" --buckets $big --steps "$steps" 2>/dev/null)
  ps_peer="$ps_peer $(echo "$p" | sed -n 's/.*examples_per_second=\([0-9.]*\).*/\1/p')"
done

isa=$("$build/tests/bench/train_bench" --model gemm_peak --steps 1 2>/dev/null | sed -n 's/.*isa=\([a-z0-9_]*\).*/\1/p' | head -1 || true)
dense_bytes=$((2 * 3329 * 4))
for b in $big $small; do
  # Expected distinct buckets of `unique` distinct ids hashed into b buckets.
  u=$(awk -v u="$unique" -v b="$b" 'BEGIN { printf "%.1f", b * (1 - exp(u * log(1 - 1 / b))) }')
  floor=$(awk -v u="$u" -v d="$dense_bytes" 'BEGIN { printf "%.0f", 2 * u * 16 * 4 + 2 * u * 8 + d }')
  e=$(echo "${eps[$b]}" | median) by=$(echo "${bps[$b]}" | median)
  echo "embedding table=${b}x16 ps=2 workers=2 examples_per_second=$e bytes_per_step=$by" \
       "floor=$floor (unique_ids=$u) ratio_to_floor=$(awk -v a="$by" -v f="$floor" 'BEGIN { printf "%.2f", a / f }')"
done
pe=$(echo "$peer" | median) te=$(echo "${eps[$big]}" | median) ppe=$(echo "$ps_peer" | median)
echo "pytorch ddp=2 gloo EmbeddingBag(sparse=True)+Adagrad table=${big}x16 examples_per_second=$pe" \
     "tandem/pytorch=$(awk -v a="$te" -v b="$pe" 'BEGIN { printf "%.2f", a / b }') isa=${isa:-unknown}" \
     "small/large table step cost=$(awk -v a="$(echo "${eps[$big]}" | median)" -v b="$(echo "${eps[$small]}" | median)" 'BEGIN { printf "%.2f", b / a }')"
echo "pytorch rpc ps=2 workers=2 sparse Adagrad on the ps table=${big}x16 examples_per_second=$ppe" \
     "tandem/pytorch_ps=$(awk -v a="$te" -v b="$ppe" 'BEGIN { printf "%.2f", a / b }')"
