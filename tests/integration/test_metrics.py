"""Prometheus metrics on --metrics-port (docs/reference/metrics.md), checked with the real
Prometheus server from Debian (scripts/setup.sh installs it; run directly, no system service): it
scrapes a 2-node job of real torch workers every second, and its query API must report the
job's one restart after a worker is killed with SIGKILL (137)."""
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import FAKE, MUSTER, REPO, muster_env, needs_torch, run_muster, wait_for
from multinode import Agents, free_port, serve

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
needs_prometheus = pytest.mark.skipif(
    not os.access(PROMETHEUS, os.X_OK),
    reason="SKIPPED LOUDLY: the prometheus server is not installed (Debian package "
           "'prometheus'; scripts/setup.sh installs it)")
WORKER = REPO / "tests" / "integration" / "scripts" / "metrics_worker.py"


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def scrape(port):
    return http_get(f"http://127.0.0.1:{port}/metrics")


class Prometheus:
    """A Prometheus server scraping `targets` every second, its data in `tmp`."""

    def __init__(self, tmp, targets):
        self.port = free_port()
        config = tmp / "prometheus.yml"
        # JSON is YAML: no YAML writer needed.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "muster", "static_configs": [
                {"targets": [f"127.0.0.1:{p}" for p in targets]}]}]}))
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, env=muster_env())
        wait_for(self._ready, 20, interval=0.1, what="prometheus ready")

    def _ready(self):
        assert self.proc.poll() is None, "prometheus exited; see prometheus.log"
        try:
            return http_get(f"http://127.0.0.1:{self.port}/-/ready", timeout=1)
        except (urllib.error.URLError, ConnectionError):
            return None

    def query(self, promql):
        """{instance: value} of an instant query."""
        q = urllib.parse.urlencode({"query": promql})
        doc = json.loads(http_get(f"http://127.0.0.1:{self.port}/api/v1/query?{q}"))
        assert doc["status"] == "success", doc
        return {r["metric"].get("instance", ""): float(r["value"][1])
                for r in doc["data"]["result"]}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)
        self.log.close()


@needs_prometheus
@needs_torch
def test_prometheus_sees_the_restart_of_a_two_node_torch_job(tmp_path):
    mports = [free_port(), free_port()]
    prom = Prometheus(tmp_path, mports)
    release = tmp_path / "release"
    agents = None
    try:
        agents = Agents(2, ["--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "2",
                            WORKER, release],
                        per_agent=lambda i: ["--metrics-port", mports[i]])
        instances = {f"127.0.0.1:{p}" for p in mports}

        def restarted():
            for p in agents.procs:
                assert p.poll() is None, f"an agent exited {p.returncode}: {p.stderr.read()}"
            seen = prom.query("muster_restarts_total")
            return set(seen) == instances and all(v == 1 for v in seen.values()) and seen
        wait_for(restarted, 25, interval=0.2, what="prometheus to see 1 restart on both agents")
        # Once the restart is seen, the second attempt runs: one worker each.
        wait_for(lambda: prom.query('muster_workers{state="running"}') ==
                 {i: 1 for i in instances}, 10, interval=0.2, what="one running worker each")
        exits = prom.query('sum(muster_worker_exits_total{code="137",while="running"})')
        assert list(exits.values()) == [1], exits
        assert set(prom.query("muster_rounds_total").values()) == {2}
        assert prom.query("sum(muster_server_joins_total)") == {"": 2}
        assert prom.query("muster_rendezvous_round_duration_seconds_count") == \
            {i: 2 for i in instances}
        assert prom.query('muster_agent_phase{phase="Running"}') == {i: 1 for i in instances}
        assert set(prom.query("process_resident_memory_bytes")) == instances
        # torch closes its store connections once the process group is made (counted in
        # c10d_store_server_test); the series is there on every agent.
        assert set(prom.query("muster_store_connections")) == instances
        assert all(v >= 0 for v in prom.query("muster_agent_seconds_since_transition").values())
        release.touch()
        results = agents.wait(30)
        assert [r[0] for r in results] == [0, 0], [r[2][-2000:] for r in results]
    finally:
        prom.stop()
        if agents:
            for p in agents.procs:
                if p.poll() is None:
                    p.kill()


def test_serve_metrics_count_joins_jobs_and_nodes(tmp_path):
    mport = free_port()
    with serve("--metrics-port", mport) as port:
        text = scrape(mport)
        assert "muster_server_joins_total 0" in text, text
        assert 'muster_server_jobs{phase="Running"} 0' in text
        assert "process_cpu_seconds_total " in text
        agents = [subprocess.Popen(
            [str(MUSTER), "run", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-id", "m", "--no-python", str(FAKE), "sleep=30"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=muster_env())
            for _ in range(2)]
        try:
            wait_for(lambda: 'muster_server_nodes{state="Running"} 2' in scrape(mport), 15,
                     interval=0.05, what="two running nodes in the server's metrics")
            text = scrape(mport)
            assert "muster_server_joins_total 2" in text, text
            assert 'muster_server_jobs{phase="Running"} 1' in text, text
            assert "muster_server_round_duration_seconds_count 1" in text, text
        finally:
            for a in agents:
                a.kill()
                a.wait(10)


def test_bad_metrics_port_names_the_flag():
    r = run_muster(["--metrics-port", "70000", "--no-python", str(FAKE)])
    assert r.returncode == 2, r.stderr[-1000:]
    assert "--metrics-port" in r.stderr and "70000" in r.stderr, r.stderr[-1000:]
    r = subprocess.run([str(MUSTER), "serve", "--port", "0", "--metrics-port", "x"],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 2 and "--metrics-port" in r.stderr, r.stderr[-1000:]
