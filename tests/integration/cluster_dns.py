"""Cluster DNS for the pod simulation (pods.py): a Pod's name reaches the other Pods'
resolvers only once the Pod is Ready, as the kubelet and CoreDNS do it.

- `Probe.from_container(c, "readinessProbe")` reads a container's probe from a manifest:
  gRPC (grpc.health.v1 Check on its port and service), tcpSocket, or none.
- `Kubelet` runs one Pod's probes as the kubelet does: the startup probe first (readiness
  is not probed before it succeeded), then the readiness probe every periodSeconds after
  initialDelaySeconds; Ready after successThreshold successes in a row, not Ready after
  failureThreshold failures in a row; no readiness probe: Ready once started. Periods are
  multiplied by `scale` so that a simulated run stays short; the order of events is the
  kubelet's.
- `ClusterDns` holds each headless Service's records: a Pod's names (e.g. `job-master-0`,
  `job-worker-1.job`) are in every Pod's hosts file while the Pod is Ready, or always when
  the Service sets publishNotReadyAddresses. A Pod always resolves its own hostname (its
  /etc/hosts, written by the kubelet). Each change replaces the hosts files by rename
  (Pods(own_etc=True)).
"""
import dataclasses
import subprocess
import threading
import time


@dataclasses.dataclass
class Probe:
    kind: str                  # "grpc", "tcp", or "none"
    port: int = 0
    service: str = ""
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @staticmethod
    def from_container(container, field):
        spec = container.get(field)
        if not spec:
            return Probe("none")
        common = dict(initial_delay=spec.get("initialDelaySeconds", 0),
                      period=spec.get("periodSeconds", 10), timeout=spec.get("timeoutSeconds", 1),
                      success_threshold=spec.get("successThreshold", 1),
                      failure_threshold=spec.get("failureThreshold", 3))
        if "grpc" in spec:
            return Probe("grpc", port=int(spec["grpc"]["port"]),
                         service=spec["grpc"].get("service", ""), **common)
        if "tcpSocket" in spec:
            return Probe("tcp", port=int(spec["tcpSocket"]["port"]), **common)
        raise AssertionError(f"{field}: probe kind not simulated: {sorted(spec)}")

    def request(self):
        """This probe as one line for PROBER."""
        return f"{self.kind} {self.port} {self.timeout} {self.service or '-'}\n"

    def __str__(self):
        what = {"grpc": f"grpc port {self.port} service {self.service!r}",
                "tcp": f"tcpSocket port {self.port}", "none": "none"}[self.kind]
        return f"{what}, every {self.period} s after {self.initial_delay} s"


# Runs in the pod's network namespace (the kubelet reaches the pod's IP; the test's own
# namespace cannot): one request per line, "grpc|tcp PORT TIMEOUT SERVICE|-", one answer
# per line, "1 SERVING" / "0 NOT_SERVING" / "0 UNAVAILABLE" / "0 <connect error>".
PROBER = r"""
import socket, sys
import grpc
ip = sys.argv[1]
STATUS = {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}
for line in sys.stdin:
    kind, port, timeout, service = line.split()
    service = "" if service == "-" else service
    if kind == "grpc":
        # grpc.health.v1.Health/Check with a hand-encoded request (field 1: service).
        request = b"\x0a" + bytes([len(service)]) + service.encode() if service else b""
        try:
            with grpc.insecure_channel(f"{ip}:{port}") as channel:
                check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                            request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
                answer = STATUS.get(check(request, timeout=float(timeout)), "unknown answer")
        except grpc.RpcError as e:
            answer = e.code().name
        ok = answer == "SERVING"
    else:
        try:
            socket.create_connection((ip, int(port)), timeout=float(timeout)).close()
            ok, answer = True, "connected"
        except OSError as e:
            ok, answer = False, e.strerror or str(e)
    print(int(ok), answer, flush=True)
"""


class Prober:
    """A PROBER process in `pod`'s network namespace. Used by one Kubelet thread only."""

    def __init__(self, pod, python):
        self.proc = subprocess.Popen(["ip", "netns", "exec", pod.ns, python, "-c", PROBER,
                                      pod.ip], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def check(self, probe):
        """(passed, answer). The prober answers within the probe's timeout plus its start."""
        self.proc.stdin.write(probe.request())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the prober exited ({self.proc.poll()})"
        ok, _, answer = line.strip().partition(" ")
        return ok == "1", answer

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ClusterDns:
    """The records of a job's headless Services. `names[i]`: the DNS names of pod i."""

    def __init__(self, pods, names, publish_not_ready):
        self.pods, self.names, self.publish_not_ready = pods, names, publish_not_ready
        self.ready = [False] * len(pods)
        self.lock = threading.Lock()
        self.log = []          # (seconds since start, line)
        self.t0 = time.monotonic()
        self._write()

    def set_ready(self, index, ready, why):
        with self.lock:
            if self.ready[index] == ready:
                return
            self.ready[index] = ready
            self.note(f"{self.pods[index].name} {'Ready' if ready else 'not Ready'} ({why})")
            self._write()

    def note(self, line):
        self.log.append((time.monotonic() - self.t0, line))

    def published(self, index):
        return self.publish_not_ready or self.ready[index]

    def _write(self):
        for pod in self.pods:
            lines = ["127.0.0.1\tlocalhost", f"{pod.ip}\t{pod.name}"]
            for other in self.pods:
                if self.published(other.index):
                    lines += [f"{other.ip}\t{name}" for name in self.names[other.index]]
            pod.replace_hosts("\n".join(lines) + "\n")

    def history(self):
        return "\n".join(f"  {t:6.2f} s  {line}" for t, line in self.log)


class Kubelet(threading.Thread):
    """Probes pod `index` (startup, then readiness) until stop(); reports to `dns`."""

    def __init__(self, dns, index, startup, readiness, scale, python):
        super().__init__(daemon=True)
        self.prober = Prober(dns.pods[index], python)
        self.dns, self.index, self.scale = dns, index, scale
        self.startup, self.readiness = startup, readiness
        self.stopped = threading.Event()
        self.last = "not probed yet"   # the last probe's answer, for a failure message

    def stop(self):
        self.stopped.set()
        self.join(10)
        self.prober.close()

    def _probe_until(self, probe, wanted, threshold, first_at, what):
        """Probes at `first_at`, then every period (scaled), until `threshold` answers in a
        row equal `wanted`; returns the last answer, or None when stopped."""
        t, streak = first_at, 0
        while not self.stopped.wait(max(0.0, t - time.monotonic())):
            passed, answer = self.prober.check(probe)
            if answer != self.last:
                self.dns.note(f"{self.dns.pods[self.index].name} {what} probe: {answer}")
            self.last = answer
            streak = streak + 1 if passed == wanted else 0
            if streak >= threshold:
                return answer
            t += probe.period * self.scale
        return None

    def run(self):
        pod = self.dns.pods[self.index].name
        started = time.monotonic()
        if self.startup.kind != "none":
            answer = self._probe_until(self.startup, True, 1,
                                       started + self.startup.initial_delay * self.scale,
                                       "startup")
            if answer is None:
                return
            self.dns.note(f"{pod} startup probe passed")
        if self.readiness.kind == "none":
            self.dns.set_ready(self.index, True, "started, no readinessProbe")
            return
        # The kubelet probes readiness only once the startup probe passed.
        first_at = max(time.monotonic(), started + self.readiness.initial_delay * self.scale)
        ready = False
        while not self.stopped.is_set():
            threshold = (self.readiness.failure_threshold if ready
                         else self.readiness.success_threshold)
            answer = self._probe_until(self.readiness, not ready, threshold, first_at,
                                       "readiness")
            if answer is None:
                return
            ready = not ready
            self.dns.set_ready(self.index, ready, f"readiness probe: {answer}")
            first_at = time.monotonic() + self.readiness.period * self.scale
