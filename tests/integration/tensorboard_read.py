#!/usr/bin/env python3
"""Reads a tandem model_dir's event files with TensorBoard's own loader
(tensorboard.backend.event_processing) and prints what TensorBoard would show: the runs,
their scalar tags, and the first and last point of each. Exit 1 when TensorBoard finds
no scalars.

  python3 tests/integration/tensorboard_read.py /tmp/tandem/fashion_mlp
"""
import sys

from tensorboard.backend.event_processing import event_multiplexer


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    mux = event_multiplexer.EventMultiplexer().AddRunsFromDirectory(sys.argv[1])
    mux.Reload()
    found = 0
    for run, tags in sorted(mux.Runs().items()):
        scalars = sorted(tags.get("scalars", []))
        print(f"run {run!r}: scalars {scalars}, graph {tags.get('graph')}")
        for tag in scalars:
            events = mux.Scalars(run, tag)
            found += len(events)
            first, last = events[0], events[-1]
            print(f"  {tag}: {len(events)} points, step {first.step} = {first.value:.4g} ... "
                  f"step {last.step} = {last.value:.4g}")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
