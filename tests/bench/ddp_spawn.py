"""What the multi-process peers (ddp_peer.py, ctr_peer.py, ctr_ps_peer.py) share.

spawn_replicas(replica, args, procs, timeout, name): runs replica(rank, *args) in `procs`
processes (torch.multiprocessing), kills them all when one fails, after `timeout`
seconds (exit 1, naming `name`) or on Ctrl-C.
group_rate(step, warmup, steps, examples_per_step): in every replica, runs `warmup` then
`steps` calls of step() between barriers; returns the group's examples/s, timed by the
slowest replica.
leave(): ends a replica process at once after flushing its output: torch's gloo
teardown (destroy_process_group, interpreter exit) can spin forever in a process
without a terminal once its peer has gone.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def spawn_replicas(replica, args, procs, timeout, name):
    ctx = mp.spawn(replica, args=args, nprocs=procs, join=False)
    deadline = time.monotonic() + timeout

    def kill_all():
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()

    try:
        # join() raises ProcessRaisedException / ProcessExitedException (and terminates
        # the other processes) when one fails; it returns True once all have exited.
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                print(f"{name}: no result after {timeout:.0f} s, stopping", file=sys.stderr)
                kill_all()
                sys.exit(1)
    except KeyboardInterrupt:
        kill_all()
        raise


def group_rate(step, warmup, steps, examples_per_step):
    for _ in range(warmup):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return examples_per_step * steps / elapsed.item()


def leave():
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
