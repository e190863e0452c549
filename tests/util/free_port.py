"""free_port(): a TCP port on 127.0.0.1 that was free a moment ago, for cluster specs
written before their servers start. Drawn at random below the kernel's ephemeral range
(as framework/core/free_port.h does) and checked by binding it, so no client connection
or port-0 bind of a neighbouring job takes it between the pick and the task's bind; never
the same port twice in one process."""

import random
import socket

_given = set()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first, last = (int(x) for x in f.read().split())
            return first, last
    except (OSError, ValueError):
        return 32768, 60999


def _try_bind(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return 0
        return s.getsockname()[1]


def free_port():
    first, last = _ephemeral_range()
    if first - 10000 >= 2000:
        band = (10000, first - 1)
    elif 65535 - last >= 2000:
        band = (last + 1, 65535)
    else:
        band = None
    for _ in range(2000):
        port = _try_bind(random.randint(*band) if band else 0)
        if port and port not in _given:
            _given.add(port)
            return port
    raise RuntimeError("no free port on 127.0.0.1")
