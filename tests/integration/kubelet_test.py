#!/usr/bin/env python3
"""A frozen task of a cluster, found by its health probe and replaced, as a kubelet does.

Runs fashion_mlp as a cluster of 1 chief + 1 worker + 1 ps on 127.0.0.1 (ephemeral
ports, a temporary model_dir), every task the same `trainer train_and_evaluate`
command with its own TF_CONFIG. This script plays the kubelet of a pod per task
with a gRPC liveness probe and restartPolicy OnFailure:

  - every --period seconds (2) it runs `trainer health --address HOST:PORT
    --timeout_ms 1000` against each running task, once the task has been up for
    --initial_delay seconds; --failure_threshold (3) failed probes in a row and the
    task's process is SIGKILLed and started again with the same command and TF_CONFIG;
  - a process that exits non-zero on its own is started again too (OnFailure), and
    counted as a crash; exit 0 is final.

Once training got going (the first checkpoint after step 0 is written, at about
step 1000 of --max_steps 3000, so a restored ps gets trained weights), the task named
by --frozen (ps, worker or chief) gets SIGSTOP and is never continued. Then it checks:

  1. the probes found the frozen task and the kubelet loop restarted it, and no task
     crashed (every restart was one of the probe's);
  2. training went on from where it was: after the freeze, no training task logs a
     step below that checkpoint's (a ps restored from nothing would start again at 0);
  3. training ends at max_steps: the checkpoint state file's newest checkpoint is at
     step >= --max_steps, and every task's last process exited 0;
  4. the chief's final evaluation has accuracy >= --min_accuracy, 0.83. The
     undisturbed job reaches 0.860-0.871 at 3000 steps on 2 cores (3 runs) and
     0.856 already at its step-1000 checkpoint; calm runs of a job differ by up to
     2.6 points under the default tier's load (README, recovery_test), and 0.83
     leaves that room, while a job that restored garbage or stopped training early
     scores far less (a fresh model about 0.1).

Prints one summary line (scenario, restarts, final step, accuracy, seconds) and
exits 0 when all hold, 1 otherwise; the logs of a failed run are printed and kept.
Every process it starts (tasks and probes) is SIGKILLed by its PID at the end, and
the whole run is bounded by --timeout seconds.

Usage: kubelet_test.py TRAINER [DATA_DIR] --frozen {ps,worker,chief}
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "fashion_mlp.toml")
TASKS = [("ps", 0), ("chief", 0), ("worker", 0)]


def name_of(task):
    return f"{task[0]}:{task[1]}"


class Pod:
    """One task: its command, TF_CONFIG, newest process and every log, as a pod's
    container with its restarts."""

    def __init__(self, task, argv, env, work):
        self.task, self.argv, self.env, self.work = task, argv, env, work
        self.proc = None
        self.started_at = 0.0
        self.logs = []
        self.failures = 0  # consecutive failed probes of the current process
        self.probe_kills = 0
        self.crashes = []  # exit codes of processes that exited non-zero on their own
        self.last_probe_output = ""

    def start(self):
        path = os.path.join(self.work, f"{self.task[0]}-{self.task[1]}.{len(self.logs)}.log")
        self.logs.append(path)
        with open(path, "w") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT)
        self.started_at = time.time()
        self.failures = 0

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.running():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def log(self, which=-1):
        with open(self.logs[which], errors="replace") as f:
            return f.read()


def probe_all(trainer, pods, timeout_ms):
    """One health probe of every pod in `pods`, all at once: {pod: (ok, output)}."""
    probes = {}
    for pod in pods:
        probes[pod] = subprocess.Popen(
            [trainer, "health", "--address", pod.address, "--timeout_ms", str(timeout_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    results = {}
    try:
        for pod, p in probes.items():
            try:
                out, _ = p.communicate(timeout=timeout_ms / 1000.0 + 10)
                results[pod] = (p.returncode == 0, out.strip())
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
                results[pod] = (False, "the probe itself did not return")
    finally:
        for p in probes.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    return results


def last_step(text):
    steps = re.findall(r"\bstep = (\d+)", text)
    return int(steps[-1]) if steps else -1


def checkpoint_step(model_dir):
    try:
        with open(os.path.join(model_dir, "checkpoint")) as f:
            m = re.search(r'^model_checkpoint_path: "[^"]*-(\d+)"', f.read(), re.M)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trainer")
    p.add_argument("data_dir", nargs="?", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--frozen", required=True, choices=["ps", "worker", "chief"],
                   help="the task type that gets SIGSTOP for good")
    p.add_argument("--max_steps", type=int, default=3000)
    p.add_argument("--save_steps", type=int, default=1000)
    p.add_argument("--min_accuracy", type=float, default=0.83)
    p.add_argument("--period", type=float, default=2.0, help="seconds between probes")
    p.add_argument("--probe_timeout_ms", type=int, default=1000)
    p.add_argument("--failure_threshold", type=int, default=3)
    p.add_argument("--initial_delay", type=float, default=5.0,
                   help="seconds after a start before its probes count")
    p.add_argument("--timeout", type=float, default=420, help="seconds for the whole run")
    args = p.parse_args()
    trainer = os.path.abspath(args.trainer)

    help_run = subprocess.run([trainer, "health", "--help"], capture_output=True, text=True)
    if help_run.returncode != 0:
        print(f"FAILED: {trainer} has no `health` subcommand:\n{help_run.stdout}{help_run.stderr}")
        return 1

    work = tempfile.mkdtemp(prefix="kubelet_")
    model_dir = os.path.join(work, "model")
    cluster = {t: [f"127.0.0.1:{free_port()}"] for t in ("chief", "worker", "ps")}
    argv = [trainer, "train_and_evaluate", "--config", CONFIG,
            "--set", f'run.model_dir="{model_dir}"',
            "--set", f'data.data_dir="{args.data_dir}"',
            "--set", f"train.max_steps={args.max_steps}",
            "--set", f"run.save_checkpoints_steps={args.save_steps}",
            "--set", "run.intra_op_threads=1", "--set", "run.inter_op_threads=1"]
    pods = {}
    for task in TASKS:
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}))
        pods[task] = Pod(task, argv, env, work)
        pods[task].address = cluster[task[0]][task[1]]
    victim = pods[(args.frozen, 0)]
    chief = pods[("chief", 0)]

    t0 = time.time()
    frozen_at = detected_at = frozen_ckpt = None
    log_offsets = {}  # pod -> (log index, size) at the freeze: what follows is checked
    events = []
    ok = False

    def event(text):
        events.append(f"{time.time() - t0:7.1f}s  {text}")
        print(events[-1], flush=True)

    try:
        for pod in pods.values():
            pod.start()
        while time.time() - t0 < args.timeout:
            tick = time.time()
            # OnFailure: exit 0 is final, any other exit (not ours) starts the task again.
            for pod in pods.values():
                if pod.proc.poll() not in (None, 0):
                    pod.crashes.append(pod.proc.returncode)
                    event(f"{name_of(pod.task)} exited {pod.proc.returncode}; restarting it")
                    pod.start()
            if all(pod.proc.poll() == 0 for pod in pods.values()):
                break
            ckpt = checkpoint_step(model_dir)
            if frozen_at is None and ckpt is not None and ckpt > 0:
                os.kill(victim.proc.pid, signal.SIGSTOP)
                frozen_at, frozen_ckpt = time.time(), ckpt
                log_offsets = {pod: (len(pod.logs) - 1, len(pod.log())) for pod in pods.values()}
                event(f"SIGSTOP {name_of(victim.task)} (pid {victim.proc.pid}), for good, at chief "
                      f"step {last_step(chief.log())}, checkpoint {ckpt}")
            due = [pod for pod in pods.values()
                   if pod.running() and time.time() - pod.started_at >= args.initial_delay]
            for pod, (healthy, out) in probe_all(trainer, due, args.probe_timeout_ms).items():
                if not pod.running():
                    continue  # it ended while probed: judged by its exit code
                if healthy:
                    pod.failures = 0
                    continue
                pod.failures += 1
                pod.last_probe_output = out
                event(f"probe of {name_of(pod.task)} failed ({pod.failures}/"
                      f"{args.failure_threshold}): {out.splitlines()[-1] if out else 'no output'}")
                if pod.failures >= args.failure_threshold:
                    event(f"SIGKILL {name_of(pod.task)} (pid {pod.proc.pid}) and start it again")
                    pod.kill()
                    pod.probe_kills += 1
                    if pod is victim and detected_at is None and frozen_at is not None:
                        detected_at = time.time()
                    pod.start()
            time.sleep(max(0.0, args.period - (time.time() - tick)))
        seconds = time.time() - t0
        timed_out = not all(pod.proc.poll() == 0 for pod in pods.values())

        final = re.search(r"final evaluation: accuracy = ([0-9.]+).*global_step = (\d+)",
                          chief.log())
        accuracy = float(final.group(1)) if final else None
        step = checkpoint_step(model_dir)
        # Every step a training task logged after the freeze (its pid's log from the
        # freeze on, and each later start's whole log).
        low_steps = {}
        for pod, (first, offset) in log_offsets.items():
            if pod.task[0] == "ps":
                continue
            after = pod.log(first)[offset:] + "".join(pod.log(i) for i in range(first + 1, len(pod.logs)))
            steps = [int(s) for s in re.findall(r"\bstep = (\d+)", after)]
            if steps and min(steps) < frozen_ckpt:
                low_steps[name_of(pod.task)] = min(steps)
        restarts = {name_of(t): pod.probe_kills + len(pod.crashes)
                    for t, pod in pods.items() if pod.probe_kills or pod.crashes}
        checks = {
            "the job ended within the timeout": not timed_out,
            f"the frozen {name_of(victim.task)} was probed, killed and restarted":
                frozen_at is not None and victim.probe_kills >= 1,
            "no task crashed or was killed by a probe but the frozen one":
                all(not pod.crashes and (pod is victim or not pod.probe_kills)
                    for pod in pods.values()),
            f"the final checkpoint is at step >= {args.max_steps}":
                step is not None and step >= args.max_steps,
            f"after the freeze no training task logged a step below checkpoint {frozen_ckpt}":
                frozen_ckpt is not None and not low_steps,
            "every task's last process exited 0":
                all(pod.proc.poll() == 0 for pod in pods.values()),
            f"the chief's final accuracy >= {args.min_accuracy}":
                accuracy is not None and accuracy >= args.min_accuracy,
        }
        ok = all(checks.values())
        detection = f"{detected_at - frozen_at:.1f}s" if detected_at and frozen_at else "none"
        if low_steps:
            print(f"steps logged after the freeze below checkpoint {frozen_ckpt}: {low_steps}")
        print(f"kubelet_test frozen={args.frozen} restarts={restarts or 'none'} "
              f"detected_after={detection} final_step={step} accuracy={accuracy} "
              f"seconds={seconds:.0f} {'PASSED' if ok else 'FAILED'}", flush=True)
        if not ok:
            for what, held in checks.items():
                print(f"  {'ok    ' if held else 'FAILED'} {what}")
            for pod in pods.values():
                for i, path in enumerate(pod.logs):
                    print(f"----- {name_of(pod.task)} start {i} ({path}), last 3000 characters")
                    print(pod.log(i)[-3000:])
        return 0 if ok else 1
    finally:
        for pod in pods.values():
            pod.kill()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs and model_dir kept in {work}")


if __name__ == "__main__":
    sys.exit(main())
