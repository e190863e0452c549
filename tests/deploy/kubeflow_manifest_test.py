#!/usr/bin/env python3
"""deploy/kubeflow/tfjob-fashion-mlp.yaml, run the way the training-operator runs it.

Reads the manifest: the TFJob's replica types and counts, each container's command
(run as `sh -c SCRIPT $0 ARGS...` runs it), ports, environment, volumes and probes,
and the ConfigMap's job file. Checks every container's keys and every probe against
Kubernetes' Container and Probe (core/v1) as the API server would: known fields only,
integer fields as integers, one handler per probe (grpc.port an integer port,
exec.command a list of strings), successThreshold 1 for liveness and startup probes.

Renders each replica as the operator and the kubelet do: TF_CONFIG with every replica
type in "cluster" (lower-case job names, <job>-<type>-<i>.<namespace>.svc:<port>
addresses, "environment": "cloud"), TANDEM_CLUSTER_TOKEN from the token Secret (a
random token, as the manifest's `kubectl create secret` makes), and the volumes at
their mount paths: the ConfigMap's files, the TLS Secret made by running the openssl
commands of the manifest's header in a temporary directory (the files its
`kubectl create secret generic` line names), and the shared volume as a temporary
directory. Then runs the stock trainer as every replica on 127.0.0.1: each service
address is a free loopback port, each replica's [security] health_port another
(`--set security.health_port=N`, as the pods' ports do not collide), each
container's /tmp its own directory. The container's wait for its pod's DNS name is
skipped (the names do not resolve here).

While the job runs it plays the kubelet's probes with the manifest's timings
(startupProbe, then livenessProbe: initialDelaySeconds, periodSeconds,
timeoutSeconds, failureThreshold): gRPC probes as `trainer health` on the replica's
plaintext health port, exec probes as the command itself with the container's /tmp.

Checks: every task exits 0; no probe reached its failureThreshold (the probes would
not restart a healthy task) and every replica passed its liveness probe at least
once; the evaluator's liveness file was never older than 25 s while it ran (it is
refreshed every 10 s); every serving replica's main port answers the health check
over mutual TLS with the Secret's certificate and tls_server_name, and refuses it in
plaintext; the evaluator, alone, reports the final evaluation at max_steps with
accuracy >= 0.85; exactly one export version exists, at max_steps.
Usage: kubeflow_manifest_test.py TRAINER [DATA_DIR]
"""
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import tomllib

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
from free_port import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "deploy", "kubeflow", "tfjob-fashion-mlp.yaml")
DEADLINE_SECS = 600
LIVENESS_FILE_MAX_AGE = 25  # seconds; the trainer refreshes it every 10 s

# core/v1 Container and Probe: their fields, as the API server knows them.
CONTAINER_FIELDS = {
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
    "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe",
    "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty"}
PROBE_HANDLERS = {"exec", "httpGet", "tcpSocket", "grpc"}
PROBE_INTS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 1,
              "successThreshold": 1, "failureThreshold": 1, "terminationGracePeriodSeconds": 1}
# What the API server fills in for a field left out.
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 10,
                  "successThreshold": 1, "failureThreshold": 3}


def fail(message):
    print("FAILED: " + message, file=sys.stderr)
    sys.exit(1)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_probe(where, probe, kind):
    """`probe` as core/v1 Probe: fields, types, exactly one handler, the API server's
    rules for thresholds."""
    if not isinstance(probe, dict):
        fail(f"{where}: a probe is an object, not {probe!r}")
    unknown = set(probe) - PROBE_HANDLERS - set(PROBE_INTS)
    if unknown:
        fail(f"{where}: unknown Probe fields {sorted(unknown)}")
    handlers = PROBE_HANDLERS & set(probe)
    if len(handlers) != 1:
        fail(f"{where}: a probe needs exactly one handler of {sorted(PROBE_HANDLERS)}, has "
             f"{sorted(handlers)}")
    for field, least in PROBE_INTS.items():
        if field in probe and (not is_int(probe[field]) or probe[field] < least):
            fail(f"{where}.{field}: {probe[field]!r} is not an integer >= {least}")
    if kind in ("livenessProbe", "startupProbe") and probe.get("successThreshold", 1) != 1:
        fail(f"{where}.successThreshold: must be 1 for a {kind}")
    if "grpc" in probe:
        g = probe["grpc"]
        if not isinstance(g, dict) or set(g) - {"port", "service"}:
            fail(f"{where}.grpc: GRPCAction has only port and service, got {g!r}")
        if not is_int(g.get("port")) or not 1 <= g["port"] <= 65535:
            fail(f"{where}.grpc.port: {g.get('port')!r} is not an integer port (a name is not "
                 "allowed for gRPC probes)")
        if "service" in g and not isinstance(g["service"], str):
            fail(f"{where}.grpc.service: not a string")
    if "exec" in probe:
        e = probe["exec"]
        if not isinstance(e, dict) or set(e) != {"command"}:
            fail(f"{where}.exec: ExecAction has exactly one field, command; got {e!r}")
        c = e["command"]
        if not isinstance(c, list) or not c or not all(isinstance(a, str) for a in c):
            fail(f"{where}.exec.command: {c!r} is not a non-empty list of strings")
    for h in ("httpGet", "tcpSocket"):
        if h in probe and not (is_int(probe[h].get("port")) or isinstance(probe[h].get("port"), str)):
            fail(f"{where}.{h}.port: not a port number or name")


def check_container(where, container):
    unknown = set(container) - CONTAINER_FIELDS
    if unknown:
        fail(f"{where}: unknown Container fields {sorted(unknown)}")
    for field in ("command", "args"):
        v = container.get(field, [])
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            fail(f"{where}.{field}: not a list of strings")
    for p in container.get("ports", []):
        if not is_int(p.get("containerPort")):
            fail(f"{where}.ports: containerPort {p.get('containerPort')!r} is not an integer")
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if kind in container:
            check_probe(f"{where}.{kind}", container[kind], kind)


def load_manifest():
    text = open(MANIFEST).read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    (tfjob,) = by_kind["TFJob"]
    (config_map,) = by_kind["ConfigMap"]
    return text, tfjob, config_map


def header_commands(text):
    """The shell commands in the manifest's leading comment, continuation lines joined."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines()


def make_tls_secret(text, work):
    """Runs the header's openssl commands in a temporary directory; returns the name
    of the Secret its `kubectl create secret generic` line makes and {key: path}."""
    commands = header_commands(text)
    first = next((i for i, c in enumerate(commands) if c.startswith("openssl req -x509")), None)
    if first is None:
        fail("no `openssl req -x509 ...` (the CA) in the manifest's header")
    last = next((i for i in range(first, len(commands))
                 if commands[i].startswith("kubectl create secret generic")), None)
    if last is None:
        fail("no `kubectl create secret generic` after the openssl commands")
    src = os.path.join(work, "tls-src")
    os.makedirs(src)
    script = "set -e\n" + "\n".join(commands[first:last])
    r = subprocess.run(["sh", "-c", script], cwd=src, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"the header's openssl commands failed:\n{script}\n{r.stdout}{r.stderr}")
    kubectl = shlex.split(commands[last])
    files = {}
    for a in kubectl[4:]:
        if a.startswith("--from-file="):
            path = a[len("--from-file="):]
            key, _, path = path.rpartition("=") if "=" in path else (os.path.basename(path), "", path)
            files[key] = os.path.join(src, path)
    return kubectl[4], files


def trainer_command(container):
    """The trainer's argv from the container's `sh -c SCRIPT $0 ARGS...`: its `exec`
    line, "$@" standing for ARGS."""
    argv = container.get("command", []) + container.get("args", [])
    if argv[:2] != ["/bin/sh", "-c"] or len(argv) < 3:
        fail(f"the container's command is not /bin/sh -c SCRIPT ...: {argv[:2]}")
    script, positional = argv[2], argv[4:]
    script = script.replace("\\\n", " ")
    m = re.search(r"exec\s+(\S*trainer)\s+(.*)", script)
    if not m:
        fail("no `exec .../trainer ...` line in the container's command")
    out = []
    for a in shlex.split(m.group(2).splitlines()[0]):
        out.extend(positional if a == "$@" else [a])
    return out


def liveness_file_of(argv):
    for a in argv:
        if a.startswith("run.liveness_file="):
            return a.split("=", 1)[1]
    return None


class Prober:
    """The kubelet's startup and liveness probes of one container, on its schedule."""

    def __init__(self, name, container, run_probe):
        self.name = name
        self.startup = dict(PROBE_DEFAULTS, **container["startupProbe"]) \
            if "startupProbe" in container else None
        self.liveness = dict(PROBE_DEFAULTS, **container["livenessProbe"])
        self.run_probe = run_probe
        self.started = self.startup is None
        self.failures = 0
        self.successes = 0  # liveness probes passed
        self.problem = None
        probe = self.startup or self.liveness
        self.next = time.time() + probe["initialDelaySeconds"]

    def current(self):
        return self.liveness if self.started else self.startup

    def due(self, now):
        return self.problem is None and now >= self.next

    def record(self, ok, output, now):
        probe = self.current()
        if ok:
            self.failures = 0
            if not self.started:
                self.started = True
                self.next = now + self.liveness["initialDelaySeconds"]
                return
            self.successes += 1
        else:
            self.failures += 1
            if self.failures >= probe["failureThreshold"]:
                kind = "liveness" if self.started else "startup"
                self.problem = (f"{self.name}: {self.failures} {kind} probes failed in a row, the "
                                f"kubelet would restart a healthy task; last: {output.strip()}")
        self.next = now + probe["periodSeconds"]


def main():
    trainer = os.path.abspath(sys.argv[1])
    data_dir = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    text, tfjob, config_map = load_manifest()
    job_name = tfjob["metadata"]["name"]
    namespace = "default"
    specs = tfjob["spec"]["tfReplicaSpecs"]
    job_toml = config_map["data"]["job.toml"]
    security = tomllib.loads(job_toml).get("security", {})
    if not all(security.get(k) for k in ("tls_cert", "tls_key", "tls_ca", "tls_server_name")):
        fail(f"the job file's [security] does not set mutual TLS: {security}")
    health_port = security.get("health_port")
    if not is_int(health_port):
        fail("the job file's [security] sets no health_port")

    # The manifest as the API server would take it, and consistent with the job file.
    for rtype, spec in specs.items():
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        where = f"{rtype}.template.spec.containers[0]"
        check_container(where, container)
        if container["name"] != "tensorflow":
            fail(f"{rtype}: the operator needs the container named \"tensorflow\"")
        if "livenessProbe" not in container:
            fail(f"{where}: no livenessProbe, a frozen {rtype} would never be replaced")
        chief_pod = specs["Chief"]["template"]["spec"]
        if (pod.get("volumes") != chief_pod.get("volumes") or container.get("volumeMounts")
                != chief_pod["containers"][0].get("volumeMounts")):
            fail(f"{rtype}: its volumes differ from the Chief's (this test renders one set)")
        volumes = {v["name"] for v in pod.get("volumes", [])}
        for m in container.get("volumeMounts", []):
            if m["name"] not in volumes:
                fail(f"{where}: volumeMount {m['name']} names no volume of the pod")
        probes = [container[k] for k in ("livenessProbe", "startupProbe") if k in container]
        if rtype == "Evaluator":
            path = liveness_file_of(trainer_command(container))
            if path is None:
                fail(f"{where}: the evaluator's command sets no run.liveness_file")
            for p in probes:
                if "exec" not in p or path not in " ".join(p["exec"]["command"]):
                    fail(f"{where}: the evaluator's probes must check its liveness file {path}")
        else:
            ports = {p["containerPort"] for p in container.get("ports", [])}
            for p in probes:
                if p.get("grpc", {}).get("port") != health_port or health_port not in ports:
                    fail(f"{where}: its probes must be gRPC on [security] health_port "
                         f"{health_port}, a port of the container")

    work = tempfile.mkdtemp(prefix="tfjob_")
    procs = []
    try:
        # The volumes, rendered at local paths.
        secret_name, secret_files = make_tls_secret(text, work)
        shared = os.path.join(work, "shared")
        os.makedirs(shared)
        volume_dirs = {}
        for v in specs["Chief"]["template"]["spec"]["volumes"]:
            d = os.path.join(work, "volumes", v["name"])
            if "configMap" in v or "secret" in v:
                os.makedirs(d)
            if "configMap" in v:
                if v["configMap"]["name"] != config_map["metadata"]["name"]:
                    fail(f"volume {v['name']} names ConfigMap {v['configMap']['name']}")
                for key, value in config_map["data"].items():
                    with open(os.path.join(d, key), "w") as f:
                        f.write(value)
            elif "secret" in v:
                if v["secret"]["secretName"] != secret_name:
                    fail(f"volume {v['name']} names Secret {v['secret']['secretName']}, the "
                         f"header makes {secret_name}")
                for key, path in secret_files.items():
                    with open(path, "rb") as src, open(os.path.join(d, key), "wb") as dst:
                        dst.write(src.read())
                    os.chmod(os.path.join(d, key), v["secret"].get("defaultMode", 0o644))
            elif "persistentVolumeClaim" in v:
                d = shared
            volume_dirs[v["name"]] = d
        mounts = {}
        for m in specs["Chief"]["template"]["spec"]["containers"][0]["volumeMounts"]:
            mounts[m["mountPath"]] = os.path.join(volume_dirs[m["name"]], m.get("subPath", ""))
        if "/shared" not in mounts:
            fail("no volume is mounted at /shared")

        def local(path):
            for mount in sorted(mounts, key=len, reverse=True):
                if path == mount or path.startswith(mount + "/"):
                    return mounts[mount].rstrip("/") + path[len(mount):]
            return path

        # The job file with the mounts' local paths (the ConfigMap's copy is read by the
        # replicas through the job-config mount).
        if '"/shared/' not in job_toml:
            fail("the job file's paths are not on the /shared volume")
        job_toml = re.sub(r'"(/[^"]*)"', lambda m: '"' + local(m.group(1)) + '"', job_toml)
        job_toml = re.sub(r'data_dir = "[^"]*"', f'data_dir = "{data_dir}"', job_toml)
        with open(local("/etc/tandem/job.toml"), "w") as f:
            f.write(job_toml)
        security = tomllib.loads(job_toml)["security"]
        token = secrets.token_hex(32)

        # The operator's cluster: every replica type, lower-case, with its pod service names.
        cluster = {}
        for rtype, spec in specs.items():
            container = spec["template"]["spec"]["containers"][0]
            port = next(p["containerPort"] for p in container["ports"] if p["name"] == "tfjob-port")
            job = rtype.lower()
            cluster[job] = [f"{job_name}-{job}-{i}.{namespace}.svc:{port}"
                            for i in range(spec["replicas"])]
        # Here every service name is a loopback port.
        loopback = {a: f"127.0.0.1:{free_port()}" for addresses in cluster.values() for a in addresses}
        local_cluster = {job: [loopback[a] for a in addresses] for job, addresses in cluster.items()}

        replicas = []  # (name, Popen, log, env, container, main address, health port, tmp dir)
        for rtype, spec in specs.items():
            container = spec["template"]["spec"]["containers"][0]
            env_names = {e["name"] for e in container.get("env", [])}
            if "TANDEM_CLUSTER_TOKEN" not in env_names:
                fail("the container does not take TANDEM_CLUSTER_TOKEN from the Secret")
            for i in range(spec["replicas"]):
                job = rtype.lower()
                name = f"{job}:{i}"
                tmp = os.path.join(work, f"{job}-{i}-tmp")  # the container's own /tmp
                os.makedirs(tmp)
                argv = [local(re.sub(r"(^|=)/tmp/", lambda m: m.group(1) + tmp + "/", a))
                        for a in trainer_command(container)]
                hport = free_port()
                argv += ["--set", f"security.health_port={hport}"]
                tf_config = {"cluster": local_cluster, "task": {"type": job, "index": i},
                             "environment": "cloud"}
                env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TANDEM_CLUSTER_TOKEN=token,
                           POD_NAME=f"{job_name}-{job}-{i}", POD_NAMESPACE=namespace)
                log = open(os.path.join(work, f"{job}-{i}.log"), "w")
                p = subprocess.Popen([trainer] + argv, env=env, stdout=log, stderr=subprocess.STDOUT)
                procs.append((name, p, log))
                replicas.append((name, p, container, loopback[cluster[job][i]], hport, tmp, env))

        # The kubelet's probes, while the replicas run.
        def grpc_probe(hport):
            return lambda timeout: [trainer, "health", "--address", f"127.0.0.1:{hport}",
                                    "--timeout_ms", str(timeout * 1000)]

        def exec_probe(command, tmp):
            mapped = [re.sub(r"(^|\s|=)/tmp/", lambda m: m.group(1) + tmp + "/", a) for a in command]
            return lambda timeout: mapped

        probers, tls_checked, file_ages = {}, set(), []
        for name, p, container, address, hport, tmp, env in replicas:
            probe = container["livenessProbe"]
            run = grpc_probe(hport) if "grpc" in probe else exec_probe(probe["exec"]["command"], tmp)
            probers[name] = (Prober(name, container, run), p, env)
        tls_args = ["--tls_ca", security["tls_ca"],
                    "--tls_cert", security["tls_cert"], "--tls_key", security["tls_key"],
                    "--tls_server_name", security["tls_server_name"]]
        evaluator_file = None
        for name, p, container, address, hport, tmp, env in replicas:
            if name.startswith("evaluator"):
                evaluator_file = re.sub(r"^/tmp/", tmp + "/", liveness_file_of(trainer_command(container)))

        end = time.time() + DEADLINE_SECS
        while any(p.poll() is None for _, p, _ in procs):
            if time.time() > end:
                fail(f"replicas still run after {DEADLINE_SECS} s")
            now = time.time()
            running = []
            for name, (prober, p, env) in probers.items():
                if p.poll() is None and prober.due(now):
                    timeout = prober.current()["timeoutSeconds"]
                    running.append((prober, p, subprocess.Popen(
                        prober.run_probe(timeout), env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True), timeout))
            for prober, p, probe_proc, timeout in running:
                try:
                    out, _ = probe_proc.communicate(timeout=timeout + 5)
                    ok = probe_proc.returncode == 0
                except subprocess.TimeoutExpired:
                    os.kill(probe_proc.pid, signal.SIGKILL)
                    out, _ = probe_proc.communicate()
                    ok = False
                if p.poll() is None:  # a task that ended meanwhile is judged by its exit code
                    prober.record(ok, out, time.time())
            # Once a serving replica passed its startup probe: its main port speaks
            # mutual TLS only.
            for name, p, container, address, hport, tmp, env in replicas:
                prober = probers[name][0]
                if (name in tls_checked or name.startswith("evaluator") or not prober.started
                        or p.poll() is not None):
                    continue
                tls_checked.add(name)
                with_tls = subprocess.run([trainer, "health", "--address", address, "--timeout_ms",
                                           "5000"] + tls_args, capture_output=True, text=True)
                plain = subprocess.run([trainer, "health", "--address", address, "--timeout_ms",
                                        "5000"], capture_output=True, text=True)
                if p.poll() is None and with_tls.returncode != 0:
                    fail(f"{name}: the health check over mutual TLS on {address} failed: "
                         f"{with_tls.stdout}{with_tls.stderr}")
                if plain.returncode == 0:
                    fail(f"{name}: {address} answered a plaintext health check: TLS is not on")
            # The evaluator's liveness file, while it runs.
            evaluator = probers["evaluator:0"]
            if evaluator[1].poll() is None and evaluator[0].started and os.path.exists(evaluator_file):
                file_ages.append(time.time() - os.path.getmtime(evaluator_file))
            time.sleep(0.5)

        for name, p, _ in procs:
            if p.returncode != 0:
                fail(f"{name} exited {p.returncode}: " + open(os.path.join(work, name.replace(':', '-') + ".log")).read()[-3000:])
        for name, (prober, _, _) in probers.items():
            if prober.problem:
                fail(prober.problem)
            if not prober.successes:
                fail(f"{name}: no liveness probe passed while it ran")
        missing = {n for n, *_ in replicas if not n.startswith("evaluator")} - tls_checked
        if missing:
            fail(f"never checked TLS on {sorted(missing)}")
        if not file_ages or max(file_ages) > LIVENESS_FILE_MAX_AGE:
            fail(f"the evaluator's liveness file {evaluator_file}: ages seen "
                 f"{[round(a) for a in file_ages[-20:]]} (at most {LIVENESS_FILE_MAX_AGE} s allowed)")

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
        passed = sum(pr.successes for pr, _, _ in probers.values())
        print(f"PASSED: {len(procs)} replicas exited 0; {passed} liveness probes passed, none "
              f"failed {min(pr.liveness['failureThreshold'] for pr, _, _ in probers.values())} "
              f"times in a row; mutual TLS on {len(tls_checked)} ports; the evaluator's liveness "
              f"file at most {max(file_ages):.0f} s old; evaluator accuracy {accuracy} at step "
              f"{step}; one export at step {signature['global_step']}")
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
