"""The chaos test's etcd mode (issue 16): a 3-member etcd in the rendezvous pod instead of
`muster serve`, the agents on `--rdzv-backend etcd`. This module holds what only that mode
needs: the cluster, which agent coordinates (the oldest node key), the SIGKILL and restart
of one member (never a majority at once), the job's status as the coordinator wrote it
(also after the job ended, when its key is gone with the coordinator's lease), and the
check that no key of the job is left after the end."""
import base64
import json
import os
import signal
import subprocess
import time

from chaos_common import MUSTER, RUN_ID, muster_env
from etcd_cluster import ETCD, ETCDCTL, EtcdCluster

PREFIX = f"/muster/{RUN_ID}/"
# `muster status` decodes a status value that the driver puts back under this prefix (the
# value is the coordinator's protobuf; the status command is what reads it).
REPLAY_PREFIX = "/chaos-replay"
LEASE_TTL = 5.0                    # heartbeat_interval x heartbeat_misses of ETCD_CONF
MEMBER_DOWN = (1.0, 4.0)           # s a killed etcd member stays down before its restart


def etcd_available():
    return os.path.exists(ETCD) and os.path.exists(ETCDCTL)


class ChaosEtcd:
    """The cluster on `pod`'s address: the chaos pods reach it over the bridge, and a pod
    whose link is down does not."""

    def __init__(self, pod):
        self.cluster = EtcdCluster(3, host=pod.ip, netns=pod.ns)
        self.down = None           # index of the member killed now, or None

    @property
    def endpoints(self):
        return self.cluster.endpoints

    def stop(self):
        self.cluster.stop()

    # -- faults -----------------------------------------------------------------------------
    def kill_member(self, rng):
        """SIGKILLs one member (the leader half of the time) when all three run; returns
        (index, was_leader) or None when one is already down (never a majority at once)."""
        if self.down is not None:
            return None
        # The member started last must have rejoined: one still catching up counts as down.
        if self.cluster.ctl("endpoint", "health").returncode != 0:
            return None
        leader = self.cluster.leader(alive_only=True)
        if leader is not None and rng.random() < 0.5:
            i = leader
        else:
            i = rng.randrange(len(self.cluster.procs))
        proc = self.cluster.procs[i]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.down = i
        return i, i == leader

    def restart_member(self):
        """Starts the killed member again on its data (it rejoins the cluster)."""
        i, self.down = self.down, None
        self.cluster.procs[i] = EtcdCluster._spawn(self.cluster.cmds[i])
        return i

    # -- reading the job --------------------------------------------------------------------
    def keys(self, prefix=PREFIX):
        return self.cluster.keys(prefix)

    def lease_left(self, prefix=PREFIX):
        """{key: seconds its lease has left (-1: no lease)} of the keys under `prefix`."""
        r = self.cluster.ctl("get", "--prefix", prefix, "--keys-only", "-w", "json")
        assert r.returncode == 0, r.stderr
        out = {}
        for kv in json.loads(r.stdout).get("kvs") or []:
            key, lease = base64.b64decode(kv["key"]).decode(), kv.get("lease", 0)
            ttl = -1
            if lease:
                t = self.cluster.ctl("lease", "timetolive", format(lease, "x"), "-w", "json")
                ttl = json.loads(t.stdout).get("ttl", -1) if t.returncode == 0 else -1
            out[key] = ttl
        return out

    def coordinator_node(self):
        """The node id of the agent that coordinates: the oldest node key (the lowest create
        revision), None when none is there or etcd does not answer."""
        try:
            nodes = self.keys(PREFIX + "nodes/")
        except (AssertionError, ValueError, subprocess.TimeoutExpired):
            return None
        if not nodes:
            return None
        oldest = min(nodes, key=nodes.get)
        return oldest[len(PREFIX + "nodes/"):]

    def status_values(self, timeout=2.0):
        """Every value the status key has had, oldest first (None for a delete): etcd keeps
        the key's history (no compaction in the test's cluster), and a watch from revision
        1 replays it."""
        cmd = [*self.cluster.wrap, ETCDCTL, "--dial-timeout=1s", "--endpoints",
               ",".join(f"http://{self.cluster.host}:{p}" for p in self.cluster.client_ports),
               "watch", "--rev", "1", PREFIX + "status", "-w", "json"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env=dict(os.environ, ETCDCTL_API="3"))
            out = r.stdout
        except subprocess.TimeoutExpired as e:
            # The watch runs until killed: what it printed by then is the history.
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        values = []
        for line in out.splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            for ev in doc.get("Events") or []:
                kv = ev.get("kv", {})
                value = None if ev.get("type") == 1 else base64.b64decode(kv.get("value", ""))
                values.append((kv.get("mod_revision", 0), value))
        return [v for _, v in sorted(values, key=lambda x: x[0])]

    def decode_status(self, value):
        """The JSON `muster status --json` prints for one status value: the value is put
        under REPLAY_PREFIX, read back by the status command and deleted."""
        key = f"{REPLAY_PREFIX}/{RUN_ID}/status"
        env = dict(os.environ, ETCDCTL_API="3")
        put = subprocess.run([*self.cluster.wrap, ETCDCTL, "--endpoints",
                              ",".join(f"http://{self.cluster.host}:{p}"
                                       for p in self.cluster.client_ports), "put", key],
                             input=value, capture_output=True, timeout=20, env=env)
        if put.returncode != 0:
            return None
        try:
            r = subprocess.run(self.status_cmd(REPLAY_PREFIX), capture_output=True, text=True,
                               timeout=30)
        finally:
            self.cluster.ctl("del", key)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def last_status(self):
        """The job's status as its coordinators last wrote it, also once the job ended and
        the key went with the last coordinator's lease (then the last one with an outcome, if
        one of the last five has it); None when there was none."""
        r = self.cluster.ctl("get", PREFIX + "status", "-w", "json")
        if r.returncode == 0:
            kvs = json.loads(r.stdout).get("kvs") or []
            if kvs:  # still there: the job runs, or its coordinator has not exited yet
                return self.decode_status(base64.b64decode(kvs[0].get("value", "")))
        # Newest first, the last one with an outcome: an agent restarted after the job ended
        # finds no key of it and starts a new job under the same id (docs/guides/etcd.md).
        values = [v for v in self.status_values() if v][-5:]
        docs = [self.decode_status(v) for v in reversed(values)]
        docs = [d for d in docs if d]
        ended = [d for d in docs if d["phase"] in ("Succeeded", "Failed")]
        return (ended or docs or [None])[0]

    def status_cmd(self, prefix="/muster", *extra):
        return [*self.cluster.wrap, str(MUSTER), "status", "--rdzv-backend", "etcd",
                "--rdzv-endpoint", self.endpoints, "--rdzv-id", RUN_ID, "--rdzv-conf",
                f"etcd_prefix={prefix}", "--timeout", "10", "--json", *extra]

    def watch_status(self, sink, stop):
        """Calls sink(doc) with the live status about every 2 s until stop() (muster status
        through etcd has no --watch)."""
        env = muster_env()
        while not stop():
            r = subprocess.run(self.status_cmd(), capture_output=True, text=True, timeout=30,
                               env=env)
            if r.returncode == 0:
                try:
                    sink(json.loads(r.stdout))
                except ValueError:
                    pass
            time.sleep(2.0)
