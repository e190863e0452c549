#!/usr/bin/env python3
"""Soak: a cluster that loses tasks at random and must still finish the job well.

Runs fashion_mlp with 1 chief + 4 workers + 2 ps + an evaluator on 127.0.0.1
(ephemeral ports), every task the same `trainer train_and_evaluate` command with its
own TF_CONFIG. While training runs it disturbs a random running task at random
times, one fault at a time, --min_gap..--max_gap seconds apart. There are two kinds
of fault, each with its own count; their order is a random shuffle of the two:

  - --kills N: SIGKILL, then a restart with the same command after --restart_delay
    seconds, as a scheduler does;
  - --freezes N: SIGSTOP for a random --min_freeze..--max_freeze seconds (5..120),
    then SIGCONT: a hung VM or a network partition without a reset, which the other
    tasks must ride out (no probe replaces the frozen task here; see
    tests/integration/kubelet_test.py for that). The next fault comes only after
    the SIGCONT and a gap.

Then it checks three outcomes and prints them:

  1. every task's last process exits 0 and the final checkpoint is at max_steps;
  2. the final accuracy is within --tolerance of an undisturbed run of the same job
     (run first, unless --baseline gives its accuracy);
  3. `ckpt verify` passes on every checkpoint the model_dir lists.

The summary reports the kills and the freezes (how many, of which tasks, for how
long) and every fault in order. Exit status 0 when all three hold, 1 otherwise. Logs
and model_dirs stay under --out. --roles limits the victims to tasks of those types
(one kill of one role: --kills 1 --roles ps); --set passes config overrides to every
task (synchronous replicas: --set distribute.sync=true). Standard library only:

  python3 tests/soak/soak.py --build build --kills 20
  python3 tests/soak/soak.py --build build --kills 10 --freezes 10
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402

ROLES = [("ps", 0), ("ps", 1), ("chief", 0), ("worker", 0), ("worker", 1), ("worker", 2),
         ("worker", 3), ("evaluator", 0)]


class Job:
    """One run of the job: its tasks, their processes (one per start) and logs."""

    def __init__(self, args, name):
        self.args = args
        self.dir = os.path.join(args.out, name)
        self.model_dir = os.path.join(self.dir, "model")
        os.makedirs(self.dir, exist_ok=True)
        self.cluster = {
            "chief": [f"127.0.0.1:{free_port()}"],
            "worker": [f"127.0.0.1:{free_port()}" for _ in range(4)],
            "ps": [f"127.0.0.1:{free_port()}" for _ in range(2)],
        }
        self.procs = {}  # (type, index) -> Popen of its newest start.
        self.starts = {}  # (type, index) -> how many times started.
        self.logs = {}  # (type, index) -> log paths, oldest first.

    def command(self):
        a = self.args
        return [os.path.join(a.build, "apps", "trainer"), "train_and_evaluate",
                "--config", a.config,
                "--set", f'run.model_dir="{self.model_dir}"',
                "--set", f"train.max_steps={a.max_steps}",
                "--set", f"run.save_checkpoints_steps={a.save_steps}",
                "--set", "run.intra_op_threads=1", "--set", "run.inter_op_threads=1",
                "--set", "eval.start_delay_secs=0", "--set", "eval.throttle_secs=0"] + [
                    x for kv in a.set for x in ("--set", kv)]

    def start(self, task):
        n = self.starts.get(task, 0)
        self.starts[task] = n + 1
        path = os.path.join(self.dir, f"{task[0]}_{task[1]}.{n}.log")
        self.logs.setdefault(task, []).append(path)
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": self.cluster, "task": {"type": task[0], "index": task[1]}}))
        with open(path, "w") as log:
            self.procs[task] = subprocess.Popen(self.command(), env=env, stdout=log,
                                                stderr=subprocess.STDOUT)

    def running(self):
        return [t for t, p in self.procs.items() if p.poll() is None]

    def wait(self, deadline):
        codes = {}
        for task, p in self.procs.items():
            try:
                codes[task] = p.wait(max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                codes[task] = "timeout"
        return codes

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def log(self, task, which=-1):
        with open(self.logs[task][which]) as f:
            return f.read()


def final_accuracy(job):
    m = re.search(r"final evaluation: accuracy = ([0-9.]+).*global_step = (\d+)",
                  job.log(("evaluator", 0)))
    return (float(m.group(1)), int(m.group(2))) if m else (None, None)


def run_job(args, name, kills, freezes, rng):
    """Runs the job with `kills` SIGKILLs and `freezes` SIGSTOP..SIGCONTs in a random
    order. Returns the job, the exit codes, the faults done as (start second, "kill"
    or "freeze", "type:index", seconds frozen or 0) and the run's seconds."""
    job = Job(args, name)
    for task in ROLES:
        job.start(task)
    t0 = time.time()
    faults = ["kill"] * kills + ["freeze"] * freezes
    rng.shuffle(faults)
    events = []
    try:
        for k, fault in enumerate(faults):
            time.sleep(rng.uniform(args.min_gap, args.max_gap))
            alive = job.running()
            chief = job.procs[("chief", 0)]
            if chief.poll() is not None or not alive:
                print(f"  the job ended after {k} faults", flush=True)
                break
            victims = [t for t in alive if t[0] in args.roles]
            if not victims:
                print(f"  no task of {args.roles} is running after {k} faults", flush=True)
                break
            victim = rng.choice(victims)
            name = f"{victim[0]}:{victim[1]}"
            proc = job.procs[victim]
            at = round(time.time() - t0, 1)
            if fault == "kill":
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                events.append((at, "kill", name, 0))
                print(f"  {at:7.1f}s  SIGKILL {name}", flush=True)
                time.sleep(args.restart_delay)
                job.start(victim)
            else:
                secs = round(rng.uniform(args.min_freeze, args.max_freeze), 1)
                proc.send_signal(signal.SIGSTOP)
                print(f"  {at:7.1f}s  SIGSTOP {name} for {secs}s", flush=True)
                time.sleep(secs)
                proc.send_signal(signal.SIGCONT)
                events.append((at, "freeze", name, secs))
                print(f"  {time.time() - t0:7.1f}s  SIGCONT {name}", flush=True)
        codes = job.wait(t0 + args.deadline)
    finally:
        job.kill_all()
    return job, codes, events, time.time() - t0


def verify(args, model_dir):
    r = subprocess.run([os.path.join(args.build, "apps", "ckpt"), "verify", model_dir],
                       capture_output=True, text=True, timeout=300)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the CMake build directory")
    p.add_argument("--config", default=os.path.join(here, "..", "..", "configs", "fashion_mlp.toml"))
    p.add_argument("--out", default="/tmp/tandem_soak", help="logs and model_dirs")
    p.add_argument("--kills", type=int, default=20, help="how many SIGKILLs (each restarted)")
    p.add_argument("--freezes", type=int, default=0,
                   help="how many SIGSTOP ... SIGCONT freezes, mixed at random with the kills")
    p.add_argument("--min_freeze", type=float, default=5.0, help="seconds a freeze lasts, at least")
    p.add_argument("--max_freeze", type=float, default=120.0, help="seconds a freeze lasts, at most")
    p.add_argument("--max_steps", type=int, default=30000)
    p.add_argument("--save_steps", type=int, default=1000)
    p.add_argument("--min_gap", type=float, default=2.0, help="seconds between faults, at least")
    p.add_argument("--max_gap", type=float, default=8.0, help="seconds between faults, at most")
    p.add_argument("--restart_delay", type=float, default=2.0)
    p.add_argument("--deadline", type=float, default=1800, help="seconds for a whole job")
    p.add_argument("--tolerance", type=float, default=0.01, help="accuracy difference allowed")
    p.add_argument("--baseline", type=float, help="undisturbed accuracy (skips that run)")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="another config override for every task (e.g. distribute.sync=true)")
    p.add_argument("--roles", default="ps,chief,worker,evaluator",
                   help="comma-separated task types the faults choose from")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    args.roles = [r for r in args.roles.split(",") if r]
    unknown = set(args.roles) - {t for t, _ in ROLES}
    if unknown or not args.roles:
        p.error(f"--roles: unknown task types {sorted(unknown)}; choose from ps, chief, worker, "
                "evaluator")
    if args.kills < 0 or args.freezes < 0:
        p.error("--kills and --freezes count faults: 0 or more")
    if not 0 <= args.min_freeze <= args.max_freeze:
        p.error("--min_freeze must be between 0 and --max_freeze")
    rng = random.Random(args.seed)
    print(f"soak: seed {args.seed}, {args.kills} kills, {args.freezes} freezes "
          f"({args.min_freeze:g}-{args.max_freeze:g} s), max_steps {args.max_steps}, out {args.out}")

    baseline = args.baseline
    if baseline is None:
        print("undisturbed run ...", flush=True)
        job, codes, _, secs = run_job(args, f"calm-{args.seed}", 0, 0, rng)
        baseline, _ = final_accuracy(job)
        print(f"  accuracy {baseline} in {secs:.0f}s; exit codes {set(codes.values())}")
        if baseline is None:
            print("the undisturbed run did not finish: see", job.dir)
            return 1

    print("disturbed run ...", flush=True)
    job, codes, events, secs = run_job(args, f"soak-{args.seed}", args.kills, args.freezes, rng)
    accuracy, step = final_accuracy(job)
    ok_verify, verify_out = verify(args, job.model_dir)
    restarts = {f"{t}:{i}": n - 1 for (t, i), n in job.starts.items() if n > 1}
    bad_exits = {f"{t}:{i}": c for (t, i), c in codes.items() if c != 0}
    outcomes = {
        "every task exited 0 and max_steps was reached":
            not bad_exits and step is not None and step >= args.max_steps,
        f"accuracy within {args.tolerance} of undisturbed":
            accuracy is not None and abs(accuracy - baseline) <= args.tolerance,
        "every listed checkpoint verifies": ok_verify,
    }
    freezes = [e for e in events if e[1] == "freeze"]
    frozen = {}
    for _, _, name, s in freezes:
        frozen[name] = round(frozen.get(name, 0) + s, 1)
    print(json.dumps({
        "seed": args.seed, "roles": args.roles, "sets": args.set,
        "kills": sum(e[1] == "kill" for e in events), "restarts": restarts,
        "freezes": len(freezes), "frozen_seconds": frozen,
        "faults": [f"{at}s {kind} {name}" + (f" {s}s" if kind == "freeze" else "")
                   for at, kind, name, s in events],
        "seconds": round(secs),
        "final_step": step, "accuracy": accuracy, "undisturbed_accuracy": baseline,
        "bad_exits": bad_exits, "outcomes": outcomes}, indent=2))
    if not ok_verify:
        print(verify_out)
    return 0 if all(outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
