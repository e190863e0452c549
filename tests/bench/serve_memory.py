"""serve_model's memory under hostile traffic.

Exports fashion_mlp after one training step, then measures `trainer serve_model`'s
resident memory (VmRSS):

  fresh    a new server after N valid :predict requests (4 threads, 8 images each)
  bursts   another new server, hit BURSTS times in a row by N hostile requests from 4
           threads (bad request lines, 200 KB headers, a Content-Length that lies,
           broken chunking, 100k-deep JSON, wrong shapes, random bytes, huge bodies)
           plus 50 requests sent half-way and abandoned; RSS two seconds after each

and prints one line per burst, the ratio of the last burst's RSS to the fresh
server's, and the growth from the first burst to the last. The server must answer a
valid request after every burst.

    /usr/bin/python3 tests/bench/serve_memory.py --trainer build/apps/trainer
      [--requests 2000] [--bursts 5] [--server_env MALLOC_ARENA_MAX=1 ...]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def exchange(port, payload, read=True, timeout=10):
    if isinstance(payload, tuple):  # (payload, read) from hostile()
        payload, read = payload
    """Sends raw bytes; returns the status line (or "" if the server closed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(payload)
            if not read:
                return ""
            data = s.recv(256)
            return data.split(b"\r\n", 1)[0].decode("latin-1")
    except OSError:
        return ""


def post(path, body, extra=b""):
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + extra + b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
            + body)


def valid_body(rng, n=8):
    return json.dumps({"instances": [{"image": [rng.random() for _ in range(784)]}
                                     for _ in range(n)]}).encode()


def hostile(rng, path):
    """(one hostile request chosen at random, whether to wait for the answer)."""
    kind = rng.randrange(9)
    # A lying Content-Length and broken chunking leave the server waiting for more:
    # the client sends and hangs up, as such clients do.
    return hostile_bytes(rng, path, kind), kind not in (2, 3)


def hostile_bytes(rng, path, kind):
    if kind == 0:  # A bad request line.
        return rng.randbytes(rng.randrange(10, 400)).replace(b"\r", b"x") + b"\r\n\r\n"
    if kind == 1:  # A 200 KB header.
        return (b"GET /v1/models/m HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 +
                b"\r\nConnection: close\r\n\r\n")
    if kind == 2:  # A Content-Length that lies (more than is sent).
        return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n"
                b"Connection: close\r\n\r\n" + b"{\"instances\": [" + b"1," * 1000)
    if kind == 3:  # Broken chunking.
        return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\nzz\r\nabc\r\n5\r\n{\"in\r\nffffffff\r\n" + b"x" * 5000)
    if kind == 4:  # 100k-deep JSON.
        return post(path, b"[" * 100000 + b"]" * 100000)
    if kind == 5:  # Wrong shapes.
        body = json.dumps({"instances": [{"image": [0.5] * rng.choice([1, 783, 785, 5000])}] * 16})
        return post(path, body.encode())
    if kind == 6:  # Random bytes as the body.
        return post(path, rng.randbytes(rng.randrange(100, 20000)))
    if kind == 7:  # A body near the limit: many small instances.
        body = json.dumps({"instances": [[0.25] * 784 for _ in range(700)]})
        return post(path, body.encode())
    return post(path, b"{\"instances\": " + b"[1.0e999," * 2000 + b"]")  # Nonsense numbers.


def run_threads(n, threads, fn):
    def worker(k):
        rng = random.Random(k)
        for _ in range(n // threads):
            fn(rng)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


class Server:
    def __init__(self, trainer, export, work, env):
        port_file = os.path.join(work, "port-%d" % time.monotonic_ns())
        self.log = open(port_file + ".log", "w")
        self.proc = subprocess.Popen(
            [trainer, "serve_model", "--export_dir", export, "--port", "0", "--port_file",
             port_file, "--model_name", "m"], stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **env))
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.port = int(open(port_file).read().strip())
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        sys.exit("serve_model did not start; see %s" % self.log.name)

    def answers(self):
        return exchange(self.port, post("/v1/models/m:predict", valid_body(random.Random(1), 1)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", default=os.path.join(ROOT, "build/apps/trainer"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--server_env", nargs="*", default=[],
                        help="KEY=VALUE settings for the server's environment")
    args = parser.parse_args()
    env = dict(kv.split("=", 1) for kv in args.server_env)
    work = tempfile.mkdtemp(prefix="serve_memory.")
    try:
        model_dir, export = os.path.join(work, "model"), os.path.join(work, "export")
        cfg = os.path.join(ROOT, "configs/fashion_mlp.toml")
        for cmd in (["train", "--set", "train.max_steps=1"], ["export", "--output", export]):
            subprocess.run([args.trainer, cmd[0], "--config", cfg, "--set",
                            'run.model_dir="%s"' % model_dir] + cmd[1:], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = "/v1/models/m:predict"

        fresh = Server(args.trainer, export, work, env)
        start = rss_mib(fresh.proc.pid)
        run_threads(args.requests, 4, lambda rng: exchange(fresh.port, post(path, valid_body(rng))))
        time.sleep(2)
        fresh_rss = rss_mib(fresh.proc.pid)
        fresh.stop()
        print("fresh server: %.0f MiB at start, %.0f MiB after %d valid requests" %
              (start, fresh_rss, args.requests))

        s = Server(args.trainer, export, work, env)
        after = []
        for b in range(args.bursts):
            half = []
            for k in range(50):  # Sent half-way, left open during the burst.
                try:
                    c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
                    c.sendall(post(path, valid_body(random.Random(k)))[:3000])
                    half.append(c)
                except OSError:
                    pass
            run_threads(args.requests, 4,
                        lambda rng: exchange(s.port, hostile(rng, path), timeout=5))
            for c in half:
                c.close()
            time.sleep(2)  # The server trims within a second of its last request.
            after.append(rss_mib(s.proc.pid))
            status = s.answers()
            print("burst %d: %.0f MiB; a valid request then: %s" % (b + 1, after[-1], status))
            if s.proc.poll() is not None or " 200 " not in status + " ":
                print("the server stopped answering")
                sys.exit(1)
        s.stop()
        print("serve_memory requests=%d bursts=%d env=%s last_over_fresh=%.2f growth_first_to_last="
              "%.0fMiB" % (args.requests, args.bursts, " ".join(args.server_env) or "default",
                           after[-1] / fresh_rss, after[-1] - after[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
