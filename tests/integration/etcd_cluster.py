"""A real etcd cluster for the etcd rendezvous backend's tests: Debian's etcd-server (3.4),
N members on 127.0.0.1 with random ports and their data on tmpfs. Starts in about 1 s.
EtcdCluster(3, host=pod.ip, netns=pod.ns) runs them in a pod of pods.py instead (on the
pod's address, etcdctl through the pod's namespace): other pods reach it over the bridge,
and a pod whose link is down does not.

MUSTER_ETCD=/path/to/etcd runs another etcd build instead (e.g. 3.5, extracted from Debian
trixie's etcd-server package; bench/notes/2026-11-26-1820-b2-etcd-16-cores.md)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

from multinode import free_port

ETCD = os.environ.get("MUSTER_ETCD") or shutil.which("etcd") or "/usr/bin/etcd"
if os.environ.get("MUSTER_ETCD") and not os.access(ETCD, os.X_OK):
    raise RuntimeError(f"MUSTER_ETCD={ETCD} is not an executable etcd: point it at one "
                       "(scripts/fetch_etcd.sh prints one), or unset it for etcd on PATH")
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


class EtcdCluster:
    """scheme https: member_args gives the TLS files (--cert-file ...); ctl_args is what
    etcdctl needs on top (--cacert ..., --user ... once auth is on). http_too: each https
    member also listens on a plain port (http_endpoints), for a client without TLS (with
    --client-cert-auth, etcd takes a certificate's CN as the user)."""
    def __init__(self, members=3, host="127.0.0.1", netns=None, scheme="http", member_args=(),
                 ctl_args=(), http_too=False):
        self.host = host
        self.wrap = ["ip", "netns", "exec", netns] if netns else []
        self.scheme = scheme
        self.ctl_args = list(ctl_args)
        self.member_args, self.http_too = list(member_args), http_too
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.procs = []
        # A member can lose its port to another server bound between free_port() and etcd's
        # listen (a test's agent, a leftover): it exits, and the cluster then limps on two
        # members or elects no leader. Start again on fresh ports and a fresh data directory,
        # up to 3 times, and say why each attempt failed.
        why = []
        for _ in range(3):
            self.dir = tempfile.mkdtemp(prefix="muster-etcd-", dir=base)
            try:
                self._start(members, host)
                self.wait_healthy(timeout=15, all_alive=True)
                return
                why.append("; ".join(f"member {name} exited: ...{self._log_tail(name)}"
                                     for name in dead))
            except AssertionError as e:
                dead = [name for name, p in zip(self.names, self.procs) if p.poll() is not None]
                why.append(str(e) + "".join(f"; member {name} exited: ...{self._log_tail(name)}"
                                            for name in dead))
            except BaseException:
                self.stop()  # no etcd left behind by a cluster that never came up
                raise
            self.stop()
        raise AssertionError("etcd cluster did not come up in 3 tries: " + " | ".join(why))

    def _start(self, members, host):
        self.client_ports = [free_port() for _ in range(members)]
        self.peer_ports = [free_port() for _ in range(members)]
        self.http_ports = [free_port() for _ in range(members)] if self.http_too else []
        self.names = [f"m{i}" for i in range(members)]
        initial = ",".join(f"{n}=http://{host}:{p}" for n, p in zip(self.names, self.peer_ports))
        token = uuid.uuid4().hex
        self.procs = []
        self.cmds = []
        for i, (name, client, peer) in enumerate(zip(self.names, self.client_ports,
                                                     self.peer_ports)):
            plain = f",http://{host}:{self.http_ports[i]}" if self.http_too else ""
            self.cmds.append(
                [*self.wrap, ETCD, "--name", name, "--data-dir", os.path.join(self.dir, name),
                 "--listen-client-urls", f"{self.scheme}://{host}:{client}{plain}",
                 "--advertise-client-urls", f"{self.scheme}://{host}:{client}",
                 *self.member_args,
                 "--listen-peer-urls", f"http://{host}:{peer}",
                 "--initial-advertise-peer-urls", f"http://{host}:{peer}",
                 "--initial-cluster", initial, "--initial-cluster-token", token,
                 "--initial-cluster-state", "new", "--logger", "zap", "--log-outputs",
                 os.path.join(self.dir, f"{name}.log")])
            self.procs.append(self._spawn(self.cmds[-1]))

    def _log_tail(self, name):
        try:
            with open(os.path.join(self.dir, f"{name}.log")) as f:
                return f.read()[-400:]
        except OSError as e:
            return f"(no log: {e})"

    @staticmethod
    def _spawn(cmd):
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill_all(self):
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def restart_all(self, timeout=15):
        """Starts every member again on its data (after kill_all); returns once healthy."""
        self.procs = [self._spawn(cmd) for cmd in self.cmds]
        self.wait_healthy(timeout=timeout)

    @property
    def endpoints(self):
        """--rdzv-endpoint's value: every member."""
        host = "localhost" if self.host == "127.0.0.1" else self.host
        return ",".join(f"{host}:{p}" for p in self.client_ports)

    @property
    def http_endpoints(self):
        """The plain ports of an https cluster made with http_too."""
        return ",".join(f"{self.host}:{p}" for p in self.http_ports)

    def ctl(self, *args, timeout=15):
        # A loaded machine (CI's xdist workers, chaos) can hold a write or `auth disable` for
        # seconds: the command's own deadline stays under the subprocess timeout.
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([*self.wrap, ETCDCTL, "--dial-timeout=1s",
                               f"--command-timeout={max(2, timeout - 5)}s",
                               "--endpoints",
                               ",".join(f"{self.scheme}://{self.host}:{p}"
                                        for p in self.client_ports), *self.ctl_args, *args],
                              capture_output=True, text=True, timeout=timeout, env=env)

    def wait_healthy(self, timeout, all_alive=False):
        """all_alive: fail at once when a member has exited (one that could not bind)."""
        deadline = time.monotonic() + timeout
        while True:
            if all_alive and any(p.poll() is not None for p in self.procs):
                raise AssertionError("an etcd member exited while the cluster started")
            # Short tries: a member that exits is seen within seconds, a slow write is retried.
            r = self.ctl("endpoint", "health", timeout=min(timeout, 8))
            if r.returncode == 0:
                r = self.ctl("put", "/muster-health", "ok", timeout=min(timeout, 8))
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"etcd cluster not healthy after {timeout}s: {r.stderr}")
            time.sleep(0.1)

    def keys(self, prefix):
        """{key: create_revision} of the keys under `prefix`."""
        r = self.ctl("get", "--prefix", prefix, "--keys-only", "-w", "json")
        assert r.returncode == 0, r.stderr
        import base64
        return {base64.b64decode(kv["key"]).decode(): kv["create_revision"]
                for kv in json.loads(r.stdout).get("kvs", [])}

    def member_ctl(self, i, *args):
        """etcdctl against member i alone."""
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([*self.wrap, ETCDCTL, "--dial-timeout=1s", "--command-timeout=2s",
                               "--endpoints",
                               f"{self.scheme}://{self.host}:{self.client_ports[i]}",
                               *self.ctl_args, *args],
                              capture_output=True, text=True, timeout=10, env=env)

    def status(self, i):
        r = self.member_ctl(i, "endpoint", "status", "-w", "json")
        return json.loads(r.stdout)[0]["Status"] if r.returncode == 0 else None

    def leader(self, alive_only=False):
        """Index of the member that leads now, or None when none answers as leader."""
        for i, p in enumerate(self.procs):
            if alive_only and p.poll() is not None:
                continue
            status = self.status(i)
            # proto3 JSON leaves out a zero: "leader" is absent while a member knows none.
            if status and status["header"]["member_id"] == status.get("leader", 0):
                return i
        return None

    def make_leader(self, i):
        """Moves the leadership to member i (etcdctl move-leader, sent to the leader)."""
        deadline = time.monotonic() + 10
        current = self.leader()
        while current is None and time.monotonic() < deadline:
            time.sleep(0.1)
            current = self.leader()
        assert current is not None, "the etcd cluster has no leader"
        if current == i:
            return
        target = format(self.status(i)["header"]["member_id"], "x")
        r = self.member_ctl(current, "move-leader", target)
        assert r.returncode == 0, r.stderr

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
