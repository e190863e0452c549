#!/bin/bash
# The GPU checks, on a machine with an NVIDIA GPU and the CUDA libraries (cuBLAS,
# cuDNN) but not tandem's build: unpacks .device/bundle.tar.xz (scripts/gpu_pack.sh),
# then runs the gpu-labelled tests, fashion_mlp and fashion_cnn through the stock
# trainer on GPU:0, and the GPU benchmarks beside the PyTorch peer. Logs go to $OUT
# (default /tmp/gpu_check).
#   scripts/gpu_check.sh [tests|train|bench|profile|scaling|cpu|cpu_e2e|amx|all]...
# cpu: the host CPU's own figures (tests/bench/run.sh, one pair per row) with its ISA,
# and a traced mixed_bfloat16 CNN step: for an Intel host with AMX.
# cpu_e2e: the host CPU's peak, and the trainer end to end against its bare step
# (fashion_mlp float32 at 1 and 2 threads, fashion_cnn mixed_bfloat16 at 2) and the
# Estimator's overhead, without the PyTorch peer: about 100 s.
# amx: the CPU figures of an AMX host, pinned to two physical cores (see below).
# scaling: the two cluster strategies on the machine's CPU cores (fashion_mlp, one
# thread per process): one process, then collective all-reduce with 2, 4 and 8
# replicas, and parameter servers (2 ps) with 4 and 8 workers.
set -uo pipefail
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
t=/tmp/tandem_gpu
rm -rf "$t" && mkdir -p "$t" && tar -C "$t" -xJf .device/bundle.tar.xz
# The GPU machine's own cuBLAS and cuDNN (CUDA toolkit or PyTorch's wheels).
libs=$(find /usr/local /opt /usr/lib -maxdepth 9 \( -name 'libcublas.so.13' -o \
  -name 'libcublasLt.so.13' -o -name 'libcudnn.so.9' \) -printf '%h\n' 2>/dev/null | sort -u |
  tr '\n' ':')
export LD_LIBRARY_PATH="$t/lib:${libs}${LD_LIBRARY_PATH:-}"
export TANDEM_DATA_DIR="$t/data" OMP_NUM_THREADS=8
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
lscpu | grep -m1 'Model name'
echo "libraries: $libs"
what=("$@")
[ ${#what[@]} -eq 0 ] && what=(all)
want() { for w in "${what[@]}"; do [ "$w" = "$1" ] || [ "$w" = all ] && return 0; done; return 1; }
status=0
run() {  # run NAME TIMEOUT COMMAND...: output to $out/NAME.log, a summary line here.
  local name=$1 secs=$2
  shift 2
  local start=$SECONDS
  timeout "$secs" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - start)) s"
  [ $rc -ne 0 ] && status=1
  return $rc
}
if want tests; then
  run gpu_session_test 120 "$t/bin/gpu_session_test"
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |loss on the|Failure|error' "$out/gpu_session_test.log" | head -20
  run gpu_kernels_test 300 "$t/bin/gpu_kernels_test"
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |ops run on the GPU|Failure|Expected|Which is|worst' \
    "$out/gpu_kernels_test.log" | head -40
fi
train() {  # train MODEL STEPS EXTRA_SETTINGS...
  local model=$1 steps=$2
  shift 2
  run "train_$model" 400 "$t/bin/trainer" train_and_evaluate --config "configs/$model.toml" \
    --set "run.model_dir=\"/tmp/tandem_gpu_$model\"" --set "data.data_dir=\"$t/data\"" \
    --set "train.max_steps=$steps" --set "run.num_gpus=1" "$@"
  grep -E 'GPU:0|global_step/sec|accuracy|rror' "$out/train_$model.log" | tail -6
}
if want train; then
  train fashion_mlp 10000 --set "eval.steps=10"
  train fashion_cnn 6000 --set "eval.steps=20"
  # TensorBoard's own reader on the event files the trainer wrote.
  run tensorboard 60 python3 tests/integration/tensorboard_read.py /tmp/tandem_gpu_fashion_cnn
  cat "$out/tensorboard.log" | grep -v Warning | head -20
fi
if want bench; then
  for m in mlp cnn; do
    run "bench_$m" 120 "$t/bin/train_bench" --model $m --gpus 1 --batch 512 --steps 300 --warmup 20
    tail -1 "$out/bench_$m.log"
    run "torch_$m" 120 python3 tests/bench/torch_gpu_peer.py --model $m --batch 512 --steps 300
    tail -1 "$out/torch_$m.log"
  done
  for n in 1024 4096; do
    run "bench_matmul_$n" 60 "$t/bin/train_bench" --model gpu_matmul --n $n --steps 50
    tail -1 "$out/bench_matmul_$n.log"
    run "torch_matmul_$n" 60 python3 tests/bench/torch_gpu_peer.py --model gpu_matmul --n $n --steps 50
    tail -1 "$out/torch_matmul_$n.log"
  done
fi
if want profile; then  # GPU time per op of one traced step (kernels wait when traced).
  for m in mlp cnn; do
    run "profile_$m" 120 "$t/bin/train_bench" --model $m --gpus 1 --batch 512 --steps 20 --profile
    head -25 "$out/profile_$m.log" | grep -v '^[IW]2'
  done
fi
# Examples/s of a run: the mean of the chief's global_step/sec lines after the first,
# times the examples one global step stands for ($2).
rate() { grep 'global_step/sec' "$1" | grep -v '^\[worker\|^\[ps' | awk -v per="$2" \
  '{v=$NF} NR>1 {s+=v; n++} END {if (n) printf "%.0f", s/n*per; else print "none"}'; }
if want scaling; then
  export OMP_NUM_THREADS=1
  common=(--config configs/fashion_mlp.toml --set "data.data_dir=\"$t/data\"" --set run.num_gpus=0
          --set run.intra_op_threads=1 --set run.inter_op_threads=1 --set run.log_step_count_steps=250
          --set run.save_checkpoints_steps=100000 --set run.save_summary_steps=0)
  batch=128
  run scale_local 120 "$t/bin/trainer" train "${common[@]}" --set train.max_steps=3000 \
    --set "run.model_dir=\"/tmp/scale_local\""
  local_rate=$(rate "$out/scale_local.log" $batch)
  echo "scaling local 1 process: $local_rate examples/s"
  for n in 2 4 8; do
    run "scale_collective_$n" 180 "$t/bin/trainer" launch --ps 0 --workers $((n - 1)) --command train \
      "${common[@]}" --set train.max_steps=3000 --set "run.model_dir=\"/tmp/scale_c$n\""
    r=$(rate "$out/scale_collective_$n.log" $((batch * n)))
    echo "scaling collective $n replicas: $r examples/s ($(awk -v a="$r" -v b="$local_rate" -v n=$n 'BEGIN{printf "%.2f", a/(n*b)}') of $n x local)"
  done
  for n in 4 8; do
    run "scale_ps_$n" 180 "$t/bin/trainer" launch --ps 2 --workers $((n - 1)) --command train \
      "${common[@]}" --set train.max_steps=$((3000 * n / 2)) --set "run.model_dir=\"/tmp/scale_p$n\""
    r=$(rate "$out/scale_ps_$n.log" $batch)
    echo "scaling ps_async $n workers + 2 ps: $r examples/s ($(awk -v a="$r" -v b="$local_rate" -v n=$n 'BEGIN{printf "%.2f", a/(n*b)}') of $n x local)"
  done
fi
cpu_tree() {  # The CPU benchmarks read Fashion-MNIST from its Debian path, and a build tree.
  mkdir -p /usr/share/datasets/fashion-mnist && cp -n "$t"/data/*.gz /usr/share/datasets/fashion-mnist/
  mkdir -p "$t/build/tests/bench" "$t/build/apps"
  ln -sf "$t/bin/train_bench" "$t/bin/estimator_bench" "$t/build/tests/bench/"
  ln -sf "$t/bin/trainer" "$t/build/apps/"
}
if want cpu_e2e; then
  cpu_tree
  for th in 1 2; do OMP_NUM_THREADS=$th "$t/bin/train_bench" --model gemm_peak --threads $th; done
  TANDEM_BENCH_REPS=1 PYTHON=/bin/false TANDEM_BENCH_E2E="fashion_mlp:float32:1 fashion_mlp:float32:2
    fashion_cnn:mixed_bfloat16:2" run cpu_e2e 300 tests/bench/run.sh "$t/build" --e2e
  grep -v '^[IW]2' "$out/cpu_e2e.log" | tail -30
fi
if want amx; then
  # The CPU figures of an AMX host on two distinct physical cores (one for 1-thread
  # rows). AMX_PARTS picks among (default: all):
  #   peak  the gemm peak at 1 and 2 threads;
  #   mlp   the float32 MLP step against another commit's train_bench_old (packed with
  #         PACK_EXTRA) on the older 784-256-128-10 shape, user CPU time beside wall;
  #   conv  the bf16 CNN step with the filter-gradient paths of AMX_PATHS (values of
  #         TANDEM_CONV_FILTER_GRAD, comma-separated, alternated step by step; default
  #         "direct," = oneDNN's kernel for the 32-channel layer against the default),
  #         their profile, the kernels oneDNN ran, and conv_filter_grad_test;
  #   e2e   `trainer train` and the Estimator against their bare steps (bf16 CNN);
  #   ceiling  the MLP's products alone at bare oneDNN speed, beside its step;
  #   pool  the steps against another build's train_bench_pool (PACK_EXTRA);
  #   overhead  only the Estimator against its bare loop (MLP 1 and 2 threads, bf16 CNN).
  parts=${AMX_PARTS:-peak mlp conv e2e ceiling}
  part() { [[ " $parts " == *" $1 "* ]]; }
  cpu_tree
  grep -o -w -E 'amx_(bf16|tile|int8)|avx512_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
  lscpu | grep -E '^(Thread|Core|Socket|CPU max MHz|L2|L3)'
  cores=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!seen[$2]++ {print $1}')
  two=$(echo "$cores" | sed -n '3p;4p' | paste -sd,)
  [[ "$two" == *,* ]] || two=$(echo "$cores" | head -2 | paste -sd,)
  one=${two%%,*}
  echo "pinned: 1 thread on cpu $one, 2 threads on cpus $two"
  b="$t/bin/train_bench"
  ONEDNN_VERBOSE=1 OMP_NUM_THREADS=1 "$b" --model mlp --steps 1 --warmup 0 2>/dev/null |
    grep -m2 -E 'runtime:|isa:'
  if part peak; then
    for th in 1 2; do
      cpus=$([ $th = 1 ] && echo "$one" || echo "$two")
      OMP_NUM_THREADS=$th taskset -c "$cpus" "$b" --model gemm_peak --threads $th | tail -1
    done
  fi
  if part mlp && [ -x "$t/bin/train_bench_old" ]; then
    for r in 1 2 3 4 5; do
      for v in old new; do
        if [ $v = old ]; then cmd=("$t/bin/train_bench_old"); else cmd=("$b" --hidden 256,128); fi
        echo "mlp_256_128 $v: $(OMP_NUM_THREADS=1 /usr/bin/time -f 'cpu_s=%U wall_s=%e' \
          taskset -c "$one" "${cmd[@]}" --model mlp --threads 1 --steps 300 2>&1 |
          grep -o -E 'examples_per_second=[0-9]+|gflops=[0-9]+|cpu_s=.*' | tr '\n' ' ')"
      done
    done
  fi
  cnn=(--model cnn --threads 2 --batch 100 --precision mixed_bfloat16)
  if part ceiling; then
    for th in 1 2; do
      cpus=$([ $th = 1 ] && echo "$one" || echo "$two")
      OMP_NUM_THREADS=$th taskset -c "$cpus" "$b" --model matmul --threads $th | tail -2
      OMP_NUM_THREADS=$th taskset -c "$cpus" "$b" --model mlp --threads $th --steps 1000 2>/dev/null |
        tail -1
    done
  fi
  if part pool && [ -x "$t/bin/train_bench_pool" ]; then  # Another build's step, A/B.
    for r in 1 2 3; do
      for v in pool new; do
        x=$([ $v = pool ] && echo "$t/bin/train_bench_pool" || echo "$b")
        echo "$v mlp 1 thread: $(OMP_NUM_THREADS=1 taskset -c "$one" "$x" --model mlp --threads 1 \
          --steps 1000 2>/dev/null | grep -o -E 'examples_per_second=[0-9]+')" \
          " cnn bf16 2 threads: $(OMP_NUM_THREADS=2 taskset -c "$two" "$x" "${cnn[@]}" --steps 100 \
          2>/dev/null | grep -o -E 'examples_per_second=[0-9]+')"
      done
    done
  fi
  # The filter-gradient paths (TANDEM_CONV_FILTER_GRAD values; empty: the default)
  # alternated step by step in one process, so the host's drift falls on each alike.
  paths=${AMX_PATHS:-direct,}
  if part conv; then
    for r in 1 2 3; do
      OMP_NUM_THREADS=2 taskset -c "$two" "$b" "${cnn[@]}" --steps 100 \
        --alternate "TANDEM_CONV_FILTER_GRAD=$paths" 2>/dev/null | grep '^alternate'
    done
    echo "profile, filter-gradient paths alternated: $paths"
    OMP_NUM_THREADS=2 taskset -c "$two" "$b" "${cnn[@]}" --steps 10 --profile --profile_steps 40 \
      --alternate "TANDEM_CONV_FILTER_GRAD=$paths" 2>/dev/null | grep -E 'node|ops summed' | head -24
    values=()
    while IFS= read -r -d, v; do values+=("$v"); done <<<"$paths,"
    for p in "${values[@]}"; do
      echo "oneDNN convolutions, TANDEM_CONV_FILTER_GRAD='$p':"
      TANDEM_CONV_FILTER_GRAD=$p ONEDNN_VERBOSE=1 OMP_NUM_THREADS=2 taskset -c "$two" "$b" \
        "${cnn[@]}" --steps 2 --warmup 1 2>/dev/null | grep '^onednn_verbose,exec,cpu,convolution' |
        awk -F, '{print $5, $6, $(NF-1)}' | sort | uniq -c | sort -rn | head -8
    done
    run conv_filter_grad_test 120 "$t/bin/conv_filter_grad_test"
    grep -E '^\[  (FAILED|PASSED) |Failure' "$out/conv_filter_grad_test.log" | head -8
  fi
  if part overhead; then  # The Estimator against the bare loop only, pinned.
    OMP_NUM_THREADS=1 taskset -c "$one" "$t/bin/estimator_bench" --config configs/fashion_mlp.toml \
      --threads 1 --steps 400 --warmup 30 --rounds 5 --set "data.data_dir=\"$t/data\"" 2>&1 |
      tail -1
    OMP_NUM_THREADS=2 taskset -c "$two" "$t/bin/estimator_bench" --config configs/fashion_mlp.toml \
      --threads 2 --steps 400 --warmup 30 --rounds 5 --set "data.data_dir=\"$t/data\"" 2>&1 |
      tail -1
    OMP_NUM_THREADS=2 taskset -c "$two" "$t/bin/estimator_bench" --config configs/fashion_cnn.toml \
      --threads 2 --steps 150 --warmup 20 --rounds 3 --set "data.data_dir=\"$t/data\"" \
      --set run.precision='"mixed_bfloat16"' 2>&1 | tail -1
  fi
  if part e2e; then
    # e2e_pair MODEL PRECISION THREADS CPUS BATCH STEPS: the trainer's mean global_step/sec
    # after the first line times the batch, then train_bench's bare step.
    e2e_pair() {
      local model=$1 precision=$2 th=$3 cpus=$4 batch=$5 steps=$6 dir rate step
      dir=$(mktemp -d)
      rate=$(OMP_NUM_THREADS=$th taskset -c "$cpus" "$t/bin/trainer" train \
        --config "configs/fashion_$model.toml" --set run.model_dir="\"$dir\"" \
        --set "data.data_dir=\"$t/data\"" --set train.max_steps=$steps \
        --set run.precision="\"$precision\"" --set run.save_checkpoints_steps=100000 \
        --set run.inter_op_threads=1 --set run.intra_op_threads=$th --set run.num_gpus=0 2>&1 |
        sed -n 's/.*global_step\/sec: \([0-9.]*\).*/\1/p' | tail -n +2 |
        awk -v b=$batch '{ s += $1; n++ } END { if (n) printf "%.0f", s / n * b }')
      step=$(OMP_NUM_THREADS=$th taskset -c "$cpus" "$b" --model $model --threads $th \
        --batch $batch --precision $precision --steps $((steps / 5)) 2>/dev/null |
        grep -o -E 'examples_per_second=[0-9]+')
      echo "$model $precision $th threads e2e: trainer=$rate bare_step $step"
    }
    for r in 1 2; do
      e2e_pair cnn mixed_bfloat16 2 "$two" 100 500
      e2e_pair mlp float32 1 "$one" 128 1500
      e2e_pair mlp float32 2 "$two" 128 1500
    done
    OMP_NUM_THREADS=2 taskset -c "$two" "$t/bin/estimator_bench" --config configs/fashion_cnn.toml \
      --threads 2 --steps 150 --warmup 20 --rounds 3 --set "data.data_dir=\"$t/data\"" \
      --set run.precision='"mixed_bfloat16"' 2>&1 | tail -1
    OMP_NUM_THREADS=1 taskset -c "$one" "$t/bin/estimator_bench" --config configs/fashion_mlp.toml \
      --threads 1 --steps 400 --warmup 30 --rounds 5 --set "data.data_dir=\"$t/data\"" 2>&1 |
      tail -1
  fi
fi
if want cpu; then
  grep -o -w -E 'amx_(bf16|tile|int8)|avx512_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
  cpu_tree
  py=$(ls /opt/torch/.venv/bin/python3 2>/dev/null || command -v python3)
  ONEDNN_VERBOSE=1 OMP_NUM_THREADS=2 "$t/bin/train_bench" --model cnn --threads 2 --batch 100 \
    --steps 2 --warmup 1 --precision mixed_bfloat16 2>/dev/null | grep '^onednn_verbose' >"$out/onednn.log"
  grep -m2 -E 'runtime:|isa:' "$out/onednn.log"
  awk -F, '$2 == "exec" {print $4, $5, $6}' "$out/onednn.log" | sort | uniq -c | sort -rn | head -12
  run cpu_profile_bf16 120 env OMP_NUM_THREADS=2 "$t/bin/train_bench" --model cnn --threads 2 \
    --batch 100 --steps 30 --precision mixed_bfloat16 --profile
  head -30 "$out/cpu_profile_bf16.log" | grep -v '^[IW]2'
  TANDEM_BENCH_REPS=${TANDEM_BENCH_REPS:-1} PYTHON=$py run cpu_bench 560 tests/bench/run.sh "$t/build"
  grep -v '^[IW]2' "$out/cpu_bench.log" | tail -40
fi
exit $status
