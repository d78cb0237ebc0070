"""A pod simulation for multi-node tests: network namespaces on a Linux bridge.

`Pods(n, tmp_path)` builds n "pods" pod0..pod<n-1>: a bridge in the root namespace, one
network namespace per pod with a veth named eth0 on that bridge and its own address in a
10.213.<X>.0/24 subnet chosen at random per use (the project's own test hosts; nothing is
routed anywhere else: the namespaces have no default route and the root namespace gets no
address on the bridge), lo up, and per pod its own /etc/hosts file and hostname.

`pod.run(args)` starts ARGS as PID 1 of a fresh PID namespace inside the pod, with the pod's
hosts file bind-mounted over /etc/hosts and the pod's hostname:

    ip netns exec NS unshare --pid --fork --mount-proc --mount --uts --kill-child \
        sh -c 'hostname podI; mount --bind HOSTS /etc/hosts; exec "$@"' sh ARGS...

With `Pods(..., own_etc=True)` each pod gets a copy of /etc instead (pods.dir/podI.etc,
bind-mounted over /etc), and its hosts file is replaced by rename(2): a resolver in the pod
reads the old or the new list, never a partly written one (cluster_dns.py rewrites it as
Pods become Ready). A bind mount of the file itself would pin the old inode.

Everything is torn down on exit, also when the test failed: processes in the pods are
killed, namespaces, veths and the bridge deleted.
"""
import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import muster_env, xdist_worker_index

_SETUP = 'hostname "$POD_HOSTNAME_"; mount --bind "$POD_HOSTS_" "$POD_HOSTS_AT_"; ' \
         'unset POD_HOSTNAME_ POD_HOSTS_ POD_HOSTS_AT_; exec "$@"'


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def skip_unless_pods_possible():
    """pytest.skip (loudly, with the reason) when this machine cannot build pods."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: the pod simulation needs root (network namespaces)")
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"SKIPPED LOUDLY: the pod simulation needs `{tool}`")
    probe = f"mprobe{uuid.uuid4().hex[:8]}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: `ip netns add` does not work here: {r.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    r = subprocess.run(["ip", "link", "add", probe, "type", "bridge"], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: cannot create a Linux bridge here: {r.stderr.strip()}")
    subprocess.run(["ip", "link", "del", probe], capture_output=True, timeout=30)


def agent_pid(proc, timeout=10):
    """The outer pid of the process unshare forked (PID 1 of the pod's PID namespace).
    `ip netns exec` execs unshare, so proc.pid is unshare's pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except FileNotFoundError:
            kids = []
        if kids:
            return kids[0]
        if proc.poll() is not None:
            raise AssertionError(f"pod process {proc.pid} exited ({proc.returncode}) "
                                 "before its PID 1 could be found")
        time.sleep(0.01)
    raise AssertionError(f"no child of unshare {proc.pid} after {timeout}s")


def signal_agent(proc, sig):
    """unshare does not forward signals: deliver `sig` to the agent itself."""
    os.kill(agent_pid(proc), sig)


def pid_namespace(pid):
    """The PID namespace id (inode link text) of an outer pid, or None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def pids_in_pid_namespace(ns):
    """Outer pids of every live (non-zombie) process in PID namespace `ns`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        out.append(int(entry))
    return out


def outer_pid(inner_pid, ns):
    """Maps a pid as seen inside PID namespace `ns` to the outer pid (None if not found)."""
    for pid in pids_in_pid_namespace(ns):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        if int(line.split()[-1]) == int(inner_pid):
                            return pid
                        break
        except OSError:
            continue
    return None


class Pod:
    def __init__(self, pods, index):
        self.pods = pods
        self.index = index
        self.name = f"pod{index}"
        self.ns = f"{pods.prefix}-{index}"
        self.veth = f"{pods.prefix}v{index}"
        self.ip = f"{pods.subnet}.{index + 1}"
        self.etc = pods.dir / f"{self.name}.etc" if pods.own_etc else None
        self.hosts = self.etc / "hosts" if self.etc else pods.dir / f"{self.name}.hosts"
        self.procs = []

    # -- /etc/hosts -----------------------------------------------------------------------
    def write_hosts(self, withhold=()):
        lines = ["127.0.0.1\tlocalhost"]
        for p in self.pods:
            if p.name not in withhold:
                lines.append(f"{p.ip}\t{p.name}")
        self.hosts.write_text("\n".join(lines) + "\n")

    def add_host(self, name, ip):
        """Appends `ip name` to this pod's hosts file in place (same inode, so the bind
        mount over /etc/hosts in running processes sees it), or with own_etc through
        replace_hosts."""
        if self.etc:
            self.replace_hosts(self.hosts.read_text() + f"{ip}\t{name}\n")
            return
        with open(self.hosts, "a") as f:
            f.write(f"{ip}\t{name}\n")

    def replace_hosts(self, text):
        """own_etc only: the hosts file becomes `text` in one rename."""
        assert self.etc, "replace_hosts needs Pods(own_etc=True)"
        tmp = self.etc / ".hosts.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.hosts)

    # -- network --------------------------------------------------------------------------
    def link_down(self):
        _ip("-n", self.ns, "link", "set", "eth0", "down")

    def link_up(self):
        _ip("-n", self.ns, "link", "set", "eth0", "up")

    # -- processes ------------------------------------------------------------------------
    def run(self, args, env=None, stdout=None, stderr=None):
        """Starts ARGS as PID 1 of a PID namespace in this pod; returns the Popen.
        stdout/stderr go to files (pods.dir/podI.N.out|err) unless given; the Popen gets
        `.out_path`/`.err_path` and `.pod`. env defaults to muster_env() (which carries
        the leftover-killer's mark)."""
        env = dict(env if env is not None else muster_env())
        env["POD_HOSTNAME_"] = self.name
        env["POD_HOSTS_"] = str(self.etc or self.hosts)
        env["POD_HOSTS_AT_"] = "/etc" if self.etc else "/etc/hosts"
        n = len(self.procs)
        out_path = self.pods.dir / f"{self.name}.{n}.out"
        err_path = self.pods.dir / f"{self.name}.{n}.err"
        with contextlib.ExitStack() as files:
            out = stdout if stdout is not None else files.enter_context(open(out_path, "w"))
            err = stderr if stderr is not None else files.enter_context(open(err_path, "w"))
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, "unshare", "--pid", "--fork", "--mount-proc",
                 "--mount", "--uts", "--kill-child", "sh", "-c", _SETUP, "sh",
                 *map(str, args)], stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL)
        proc.out_path, proc.err_path, proc.pod = out_path, err_path, self
        self.procs.append(proc)
        return proc

    def __repr__(self):
        return f"<Pod {self.name} {self.ip} ns={self.ns}>"


def read_text(path):
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class Pods:
    """Context manager: `with Pods(3, tmp_path, withhold={1: ["pod0"]}) as pods: ...`.
    withhold maps a pod index to hostnames left out of that pod's hosts file."""

    def __init__(self, n, tmp_path, withhold=None, own_etc=False):
        skip_unless_pods_possible()
        self.n = n
        self.own_etc = own_etc
        tok = uuid.uuid4().hex[:6]
        self.prefix = f"mp{tok}"           # ns mp<tok>-<i>, veth mp<tok>v<i>: <= 15 chars
        self.bridge = f"mp{tok}br"
        seed = f"{os.environ.get('PYTEST_CURRENT_TEST', '')}:{os.getpid()}:{time.time_ns()}"
        # Under pytest-xdist each worker has its own block of subnets: two pod sets that run
        # at once never share one (their bridges would both route it).
        index = xdist_worker_index() % 4
        self.subnet = f"10.213.{index * 60 + random.Random(seed).randint(0, 59)}"
        self.dir = tmp_path / "pods"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pods = [Pod(self, i) for i in range(n)]
        self.withhold = withhold or {}

    def __iter__(self):
        return iter(self.pods)

    def __getitem__(self, i):
        return self.pods[i]

    def __len__(self):
        return self.n

    def __enter__(self):
        try:
            self._build()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False

    def _build(self):
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for pod in self.pods:
            _ip("netns", "add", pod.ns)
            _ip("-n", pod.ns, "link", "set", "lo", "up")
            _ip("link", "add", pod.veth, "type", "veth", "peer", "name", "eth0", "netns", pod.ns)
            _ip("link", "set", pod.veth, "master", self.bridge)
            _ip("link", "set", pod.veth, "up")
            _ip("-n", pod.ns, "addr", "add", f"{pod.ip}/24", "dev", "eth0")
            _ip("-n", pod.ns, "link", "set", "eth0", "up")
            if pod.etc:
                r = subprocess.run(["cp", "-a", "/etc", str(pod.etc)], capture_output=True,
                                   text=True, timeout=60)
                if r.returncode != 0:
                    raise RuntimeError(f"cp -a /etc {pod.etc} failed: {r.stderr.strip()}")
            pod.write_hosts(self.withhold.get(pod.index, ()))
        # Wait until every link is up on both ends (a bridge without STP forwards at once),
        # so a test's timings do not include link setup.
        deadline = time.monotonic() + 10
        for pod in self.pods:
            while not ("state UP" in _ip("-n", pod.ns, "-o", "link", "show", "eth0").stdout
                       and "state UP" in _ip("-o", "link", "show", pod.veth).stdout):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{pod}: eth0 did not come up")
                time.sleep(0.05)

    def cleanup(self):
        # Processes first: kill whatever lives in the pods' network namespaces (agents are
        # PID 1 of their PID namespace, so killing them takes their workers along).
        for _ in range(3):
            left = False
            for pod in self.pods:
                r = _ip("netns", "pids", pod.ns, check=False)
                for pid in r.stdout.split():
                    left = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                for proc in pod.procs:
                    if proc.poll() is None:
                        with contextlib.suppress(ProcessLookupError):
                            proc.kill()
            for pod in self.pods:
                for proc in pod.procs:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(5)
            if not left:
                break
            time.sleep(0.1)
        for pod in self.pods:
            _ip("netns", "del", pod.ns, check=False)
            _ip("link", "del", pod.veth, check=False)  # gone with its peer normally
        _ip("link", "del", self.bridge, check=False)


def name_pods(pods, names):
    """Kubernetes-style hostnames: pod i is called names[i] from now on (the hostname its
    later run()s set; also its log file names), and its own hosts file maps that name to
    its address, as a Pod's /etc/hosts does. Other pods learn names only through
    Pod.add_host (the cluster DNS of a headless Service)."""
    for pod, name in zip(pods, names):
        pod.name = name
        pod.add_host(name, pod.ip)
