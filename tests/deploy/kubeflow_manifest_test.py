#!/usr/bin/env python3
"""deploy/kubeflow/tfjob-fashion-mlp.yaml, run the way the training-operator runs it.

Reads the manifest: the TFJob's replica types and counts, the container's trainer
command, its port and environment, and the ConfigMap's job file. Renders each
replica's environment as the operator does: TF_CONFIG with every replica type in
"cluster" (lower-case job names, <job>-<type>-<i>.<namespace>.svc:<port> addresses,
"environment": "cloud"), TANDEM_CLUSTER_TOKEN from the Secret (a random token, as the
manifest's `kubectl create secret` makes). Then runs the stock trainer as every
replica on 127.0.0.1, each service address mapped to a free loopback port, with the
job file as the ConfigMap has it but for the shared volume's path (a temporary
directory) and the data directory. The container's wait for its pod's DNS name is
skipped (the names do not resolve here).

Checks: every task exits 0; the evaluator, alone, reports the final evaluation at
max_steps with accuracy >= 0.85; exactly one export version exists, at max_steps.
Usage: kubeflow_manifest_test.py TRAINER [DATA_DIR]
"""
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "deploy", "kubeflow", "tfjob-fashion-mlp.yaml")
DEADLINE_SECS = 600


def fail(message):
    print("FAILED: " + message, file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_manifest():
    docs = [d for d in yaml.safe_load_all(open(MANIFEST)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    (tfjob,) = by_kind["TFJob"]
    (config_map,) = by_kind["ConfigMap"]
    return tfjob, config_map


def trainer_command(container):
    """The trainer's argv from the container's shell script: its `exec` line."""
    script = " ".join(container.get("command", [])[2:] + container.get("args", []))
    script = script.replace("\\\n", " ")
    m = re.search(r"exec\s+(\S*trainer)\s+(.*)", script)
    if not m:
        fail("no `exec .../trainer ...` line in the container's command")
    return shlex.split(m.group(2).splitlines()[0])


def main():
    trainer = os.path.abspath(sys.argv[1])
    data_dir = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    tfjob, config_map = load_manifest()
    job_name = tfjob["metadata"]["name"]
    namespace = "default"
    specs = tfjob["spec"]["tfReplicaSpecs"]

    # The operator's cluster: every replica type, lower-case, with its pod service names.
    cluster, port_of = {}, {}
    for rtype, spec in specs.items():
        container = spec["template"]["spec"]["containers"][0]
        if container["name"] != "tensorflow":
            fail(f"{rtype}: the operator needs the container named \"tensorflow\"")
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "tfjob-port")
        job = rtype.lower()
        cluster[job] = [f"{job_name}-{job}-{i}.{namespace}.svc:{port}" for i in range(spec["replicas"])]
    # Here every service name is a loopback port.
    loopback = {}
    for job, addresses in cluster.items():
        for a in addresses:
            loopback[a] = f"127.0.0.1:{free_port()}"
    local_cluster = {job: [loopback[a] for a in addresses] for job, addresses in cluster.items()}

    work = tempfile.mkdtemp(prefix="tfjob_")
    shared = os.path.join(work, "shared")
    job_toml = config_map["data"]["job.toml"]
    if '"/shared/' not in job_toml:
        fail("the job file's paths are not on the /shared volume")
    job_toml = job_toml.replace('"/shared/', f'"{shared}/')
    job_toml = re.sub(r'data_dir = "[^"]*"', f'data_dir = "{data_dir}"', job_toml)
    config_dir = os.path.join(work, "etc-tandem")
    os.makedirs(config_dir)
    with open(os.path.join(config_dir, "job.toml"), "w") as f:
        f.write(job_toml)
    token = secrets.token_hex(32)

    procs = []
    try:
        for rtype, spec in specs.items():
            container = spec["template"]["spec"]["containers"][0]
            argv = [a.replace("/etc/tandem", config_dir) for a in trainer_command(container)]
            env_names = {e["name"] for e in container.get("env", [])}
            if "TANDEM_CLUSTER_TOKEN" not in env_names:
                fail("the container does not take TANDEM_CLUSTER_TOKEN from the Secret")
            for i in range(spec["replicas"]):
                job = rtype.lower()
                tf_config = {"cluster": local_cluster, "task": {"type": job, "index": i},
                             "environment": "cloud"}
                env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TANDEM_CLUSTER_TOKEN=token,
                           POD_NAME=f"{job_name}-{job}-{i}", POD_NAMESPACE=namespace)
                log = open(os.path.join(work, f"{job}-{i}.log"), "w")
                procs.append((f"{job}:{i}", subprocess.Popen([trainer] + argv, env=env, stdout=log,
                                                           stderr=subprocess.STDOUT), log))
        end = time.time() + DEADLINE_SECS
        for name, p, _ in procs:
            try:
                code = p.wait(timeout=max(1, end - time.time()))
            except subprocess.TimeoutExpired:
                fail(f"{name} still runs after {DEADLINE_SECS} s")
            if code != 0:
                fail(f"{name} exited {code}: " + open(os.path.join(work, name.replace(':', '-') + ".log")).read()[-3000:])
        logs = {name: open(os.path.join(work, name.replace(":", "-") + ".log")).read() for name, _, _ in procs}
        finals = {n: l for n, l in logs.items() if "final evaluation:" in l}
        if list(finals) != ["evaluator:0"]:
            fail(f"the final evaluation was reported by {sorted(finals)}, not the evaluator alone")
        m = re.search(r"final evaluation: accuracy = ([0-9.]+).*global_step = (\d+)", finals["evaluator:0"])
        accuracy, step = float(m.group(1)), int(m.group(2))
        max_steps = int(re.search(r"max_steps = (\d+)", job_toml).group(1))
        if step < max_steps or accuracy < 0.85:
            fail(f"final evaluation accuracy {accuracy} at step {step} (max_steps {max_steps})")
        model_dir = re.search(r'model_dir = "([^"]+)"', job_toml).group(1)
        exporter = os.path.join(model_dir, "export", "exporter")
        versions = sorted(os.listdir(exporter)) if os.path.isdir(exporter) else []
        if len(versions) != 1:
            fail(f"{len(versions)} export versions in {exporter}: {versions}")
        signature = json.load(open(os.path.join(exporter, versions[0], "signature.json")))
        if signature.get("global_step", 0) < max_steps:
            fail(f"the export is at step {signature.get('global_step')}")
        print(f"PASSED: {len(procs)} replicas exited 0; evaluator accuracy {accuracy} at step {step}; "
              f"one export at step {signature['global_step']}")
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
            log.close()
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
