#!/usr/bin/env bash
# deploy/slurm/train_fashion_mlp.sbatch on a real Slurm: this test starts munged,
# slurmctld and slurmd on 127.0.0.1 (one node that declares more CPUs than the machine
# has), each with files in its own temporary directory, and stops them by PID at the end.
#   1. sbatch the script (chief, ps, 2 workers, evaluator): the job ends COMPLETED with
#      exit code 0 (srun fails the job when any task fails), the evaluator reports
#      accuracy >= 0.85 at max_steps, and every checkpoint verifies.
#   2. sbatch a longer run, scancel it once a checkpoint exists: the job ends CANCELLED
#      and no trainer of it is left; the same sbatch again restores the newest
#      checkpoint and completes.
# Needs root and Debian's slurm-wlm and munge (.ci/run installs them); exits 77 (ctest:
# skipped) without them, or when the daemons cannot start on this machine (their logs
# say why).
# Usage: tests/slurm/slurm_test.sh BUILD_DIR
set -euo pipefail
build=$(realpath "${1:?usage: slurm_test.sh BUILD_DIR}")
src=$(realpath "$(dirname "$0")/../..")
trainer=$build/apps/trainer
ckpt=$build/apps/ckpt

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || skip "slurmd must run as root"
for cmd in munged slurmctld slurmd sbatch scontrol scancel; do
  command -v "$cmd" >/dev/null || skip "$cmd is not installed (apt-get install slurm-wlm munge)"
done
[[ -x $trainer && -x $ckpt ]] || fail "build $trainer and $ckpt first"

work=$(mktemp -d /tmp/tandem_slurm.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  # Whatever a job left behind (there must be nothing; check_no_trainers says so).
  pkill -9 -f "$work/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The first of N consecutive free TCP ports on 127.0.0.1, below the kernel's range of
# ephemeral ports (so no outgoing connection takes one before its task binds it).
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
lo, hi = (10000, low - 1) if low - 10000 > 1000 else (high + 1, 65535)
for _ in range(200):
    base = random.randint(lo, hi - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PY
}

mkdir -p "$work/munge" "$work/state" "$work/spool" "$work/log"
chmod 711 "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged --foreground --force --key-file="$work/munge/munge.key" \
  --socket="$work/munge/munge.sock" --pid-file="$work/munge/munged.pid" \
  --log-file="$work/log/munged.log" --seed-file="$work/munge/munge.seed" \
  >"$work/log/munged.out" 2>&1 &
pids+=($!)

ctld_port=$(free_ports 1)
slurmd_port=$(free_ports 1)
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=tandemtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
MailProg=/bin/true
SlurmUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=10
NodeName=tandemnode NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=8 RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=tandemnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF

for _ in $(seq 50); do [[ -S $work/munge/munge.sock ]] && break; sleep 0.1; done
# Daemons that cannot start here (a container without the privileges they need, ...)
# make the test a skip, with their logs; everything after they are up must pass.
[[ -S $work/munge/munge.sock ]] ||
  skip "munged did not start: $(tail -n 5 "$work/log/munged.out" "$work/log/munged.log" 2>&1)"
slurmctld -D -f "$SLURM_CONF" >"$work/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N tandemnode -f "$SLURM_CONF" >"$work/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null ||
      skip "a daemon exited: $(tail -n 5 "$work"/log/*.out "$work/log/munged.log" 2>&1)"
  done
  state=$(timeout 5 scontrol show node tandemnode 2>/dev/null | sed -n 's/.*State=\([A-Z+_]*\).*/\1/p' || true)
  [[ $state == IDLE* ]] && break
  sleep 0.2
done
[[ ${state:-} == IDLE* ]] || skip "the node did not come up (state '${state:-}'): $(tail -n 5 "$work/log/slurmctld.log" "$work/log/slurmd.log" 2>&1)"
echo "slurmctld and slurmd up on 127.0.0.1 (ports $ctld_port, $slurmd_port)"

# submit MODEL_DIR MAX_STEPS: prints the job id.
submit() {
  local base
  base=$(free_ports 5)
  TRAINER=$trainer CONFIG=$src/configs/fashion_mlp.toml MODEL_DIR=$1 NUM_PS=1 EVALUATOR=1 \
    HOSTS=127.0.0.1 BASE_PORT=$base TANDEM_DATA_DIR=${TANDEM_DATA_DIR:-/usr/share/datasets/fashion-mnist} \
    sbatch --parsable --chdir="$src" --nodes=1 --ntasks=5 --cpus-per-task=1 --mem-per-cpu=100 \
      --output="$work/log/job-%j.out" "$src/deploy/slurm/train_fashion_mlp.sbatch" \
      --set train.max_steps="$2" --set run.save_checkpoints_steps=1000 \
      --set eval.start_delay_secs=0 --set eval.throttle_secs=0
}
# A field of `scontrol show job`; empty when scontrol does not answer (slurmctld busy).
job_field() { (scontrol show job "$1" 2>/dev/null || true) | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# Whether a JobState is final. Anything else (PENDING, CONFIGURING, RUNNING, COMPLETING,
# or no answer) means the job may still run.
ended() {
  case $1 in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED) return 0 ;;
  esac
  return 1
}
# wait_end JOB SECONDS: waits until the job has ended; prints its state.
wait_end() {
  local s
  for _ in $(seq $(($2 * 2))); do
    s=$(job_field "$1" JobState)
    ended "$s" && { echo "$s"; return; }
    sleep 0.5
  done
  echo "STILL_${s:-UNKNOWN}"
}
check_no_trainers() {
  local left
  for _ in $(seq 60); do
    left=$(pgrep -f "run.model_dir=\"$1\"" || true)
    [[ -z $left ]] && return 0
    sleep 0.5
  done
  fail "trainers left behind after the job ended: $(ps -o pid,args -p "$(echo $left | tr ' ' ,)")"
}

# 1. One run to the end.
model=$work/model
job=$(submit "$model" 6000)
state=$(wait_end "$job" 400)
out=$work/log/job-$job.out
[[ $state == COMPLETED ]] || fail "job $job ended $state: $(tail -n 30 "$out")"
[[ $(job_field "$job" ExitCode) == 0:0 ]] || fail "job $job exit code $(job_field "$job" ExitCode)"
accuracy=$(sed -n 's/.*final evaluation:.*accuracy = \([0-9.]*\).*global_step = \([0-9]*\).*/\1 \2/p' "$out" | tail -1)
[[ -n $accuracy ]] || fail "no final evaluation in $out: $(tail -n 30 "$out")"
read -r acc step <<<"$accuracy"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85"
((step >= 6000)) || fail "evaluated step $step < 6000"
"$ckpt" verify "$model" >/dev/null || fail "ckpt verify $model"
check_no_trainers "$model"
echo "run to the end: job $job COMPLETED, exit 0:0, accuracy $acc at step $step, checkpoints verify"

# 2. scancel mid-run, then the same sbatch resumes.
# The step of MODEL_DIR's newest checkpoint (its "checkpoint" state file), or 0.
newest_step() {
  sed -n 's/^model_checkpoint_path: ".*ckpt-\([0-9]*\)"$/\1/p' "$1/checkpoint" 2>/dev/null | head -1 |
    grep . || echo 0
}
model=$work/resumed
job=$(submit "$model" 6000)
for _ in $(seq 600); do
  (($(newest_step "$model") >= 1000)) && break
  state=$(job_field "$job" JobState)
  ! ended "$state" ||
    fail "job $job ended $state before its checkpoint at step 1000: $(tail -n 30 "$work/log/job-$job.out" 2>&1)"
  sleep 0.5
done
(($(newest_step "$model") >= 1000)) ||
  fail "job $job ($(job_field "$job" JobState)) wrote no checkpoint at step 1000 in 300 s"
scancel "$job"
state=$(wait_end "$job" 60)
[[ $state == CANCELLED ]] || fail "cancelled job $job ended $state"
check_no_trainers "$model"
newest=$(newest_step "$model")
((newest >= 1000 && newest < 6000)) || fail "the cancelled job's newest checkpoint is at step $newest"
echo "scancel: job $job CANCELLED with its newest checkpoint at step $newest, no process left"
job=$(submit "$model" 6000)
state=$(wait_end "$job" 400)
out=$work/log/job-$job.out
[[ $state == COMPLETED ]] || fail "resumed job $job ended $state: $(tail -n 30 "$out")"
restored=$(sed -n 's/^0: .*Restoring parameters from .*model\.ckpt-\([0-9]*\)$/\1/p' "$out" | head -1)
[[ -n $restored ]] || fail "the resumed chief restored nothing: $(head -n 40 "$out")"
((restored >= newest)) || fail "the resumed chief restored step $restored, older than $newest"
"$ckpt" verify "$model" >/dev/null || fail "ckpt verify $model"
check_no_trainers "$model"
echo "resume: job $job restored the checkpoint at step $restored and COMPLETED"
echo PASSED
