"""Issue 4: agents on several nodes (simulated on loopback) form one job over gRPC."""
import json
import re
import signal
import subprocess
import time

import pytest

from conftest import FAKE, MUSTER, REPO, muster_env, pid_alive, wait_for
from multinode import Agents, free_port, serve, wait_job_exists

SCRIPT = REPO / "tests" / "integration" / "scripts" / "multinode_check.py"


def rank_rows(path):
    """Rows written by fake_worker's ranks= action, as dicts."""
    keys = ["rank", "local_rank", "group_rank", "world", "group_world", "restart", "master", "pid"]
    try:
        return [dict(zip(keys, line.split())) for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


def test_three_agents_real_torch(any_torch, tmp_path):
    out = tmp_path / "out.jsonl"
    agents = Agents(3, ["--nnodes", "3", "--nproc-per-node", "2", SCRIPT],
                    env=muster_env(PYTHON_EXEC=any_torch, OUT=out))
    for rc, _, err in agents.wait(180):
        assert rc == 0, err[-3000:]
        assert "job succeeded: all 6 workers on 3 nodes exited 0" in err.splitlines()[-1]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(int(r["RANK"]) for r in rows) == list(range(6))
    for r in rows:
        assert r["WORLD_SIZE"] == "6" and r["GROUP_WORLD_SIZE"] == "3"
        assert r["LOCAL_WORLD_SIZE"] == "2" and r["sum"] == 21.0
        assert int(r["RANK"]) == 2 * int(r["GROUP_RANK"]) + int(r["LOCAL_RANK"])
        assert r["NODE_RANK"] == r["GROUP_RANK"] and r["ROLE_RANK"] == r["RANK"]
    assert len({(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows}) == 1


def test_restart_is_job_wide_and_ranks_stay(tmp_path):
    ranks = tmp_path / "ranks"
    agents = Agents(3, ["--nnodes", "3", "--nproc-per-node", "2", "--max-restarts", "1",
                        "--no-python", FAKE, f"ranks={ranks}", "sleep=0.3",
                        "if-attempt=0", "if-global-rank=3", "exit=137", "sleep=0.5"],
                    per_agent=lambda i: ["--node-rank", i])
    for rc, _, err in agents.wait():
        assert rc == 0, err[-3000:]
    rows = rank_rows(ranks)
    by_attempt = {a: {(r["rank"], r["group_rank"]) for r in rows if r["restart"] == a}
                  for a in ("0", "1")}
    # Every node restarted, all saw TORCHELASTIC_RESTART_COUNT=1, ranks did not move.
    assert len(by_attempt["0"]) == len(by_attempt["1"]) == 6, rows
    assert by_attempt["0"] == by_attempt["1"]
    assert {r["restart"] for r in rows} == {"0", "1"}


def test_budget_spent_every_agent_exits_with_root_cause(tmp_path):
    agents = Agents(3, ["--nnodes", "3", "--nproc-per-node", "2", "--max-restarts", "0",
                        "--no-python", FAKE, "sleep=0.2", "if-global-rank=5", "exit=137",
                        "sleep=30"],
                    per_agent=lambda i: ["--node-rank", i])
    for rc, _, err in agents.wait():
        assert rc == 137, err[-3000:]
        last = err.strip().splitlines()[-1]
        assert "rank 5" in last and "exit 137" in last and "budget spent" in last, last


def test_fatal_exit_stops_every_node_at_once(tmp_path):
    t0 = time.monotonic()
    agents = Agents(3, ["--nnodes", "3", "--nproc-per-node", "2", "--max-restarts", "5",
                        "--restart-policy", "ExitCode", "--no-python", FAKE, "sleep=0.2",
                        "if-global-rank=2", "exit=1",
                        "sleep=60"],
                    per_agent=lambda i: ["--node-rank", i])
    for rc, _, err in agents.wait():
        assert rc == 1, err[-3000:]
        assert "not restartable" in err.strip().splitlines()[-1]
    assert time.monotonic() - t0 < 20  # nobody waited for the 60 s sleepers


@pytest.mark.serial
def test_killed_agent_fails_fixed_size_job_with_138(tmp_path):
    stamps = tmp_path / "stamps"
    agents = Agents(3, ["--nnodes", "3", "--nproc-per-node", "2", "--no-python", FAKE,
                        f"ranks={stamps}", "sleep=60"],
                    per_agent=lambda i: ["--node-rank", i])
    wait_for(lambda: len(rank_rows(stamps)) == 6, 30, what="6 workers")
    victim = agents.procs[2]
    survivors = [int(r["pid"]) for r in rank_rows(stamps) if r["group_rank"] != "2"]
    victim.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    # The others see the stream close at once and stop their workers within 1 s.
    wait_for(lambda: not any(pid_alive(p) for p in survivors), 1.0,
             what="the other nodes' workers to stop")
    print(f"workers of the other nodes stopped {time.monotonic() - t0:.3f} s after kill -9")
    results = agents.wait(60)
    for rc, _, err in results[:2]:
        assert rc == 138, err[-3000:]
        assert "lost" in err.strip().splitlines()[-1]


def test_elastic_join_and_loss_reform_without_using_restarts(tmp_path):
    ranks = tmp_path / "ranks"
    common = ["--nnodes", "2:4", "--nproc-per-node", "1", "--rdzv-conf",
              "last_call_timeout=1s,heartbeat_interval=1s", "--no-python", FAKE,
              f"ranks={ranks}", "sleep=120"]
    first = Agents(2, common)
    wait_for(lambda: {r["world"] for r in rank_rows(ranks)} == {"2"} and len(rank_rows(ranks)) >= 2,
             30, what="a round of 2")
    # A third node arrives: a new round with 3, no restart consumed.
    third = subprocess.Popen([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{first.port}",
                              "--rdzv-id", "test", *map(str, common)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env())
    wait_for(lambda: sum(r["world"] == "3" for r in rank_rows(ranks)) == 3, 30,
             what="a round of 3")
    assert {r["restart"] for r in rank_rows(ranks)} == {"0"}
    # One is killed: a new round with the 2 left.
    third.send_signal(signal.SIGKILL)
    third.wait(10)
    wait_for(lambda: sum(r["world"] == "2" for r in rank_rows(ranks)) == 4, 30,
             what="a round of 2 after the loss")
    assert {r["restart"] for r in rank_rows(ranks)} == {"0"}
    for p in first.procs:
        p.send_signal(signal.SIGTERM)
    for rc, _, err in first.wait(30):
        assert rc in (143, 138), err[-2000:]


@pytest.mark.parametrize("bad,needle,code", [
    (["--node-rank", "0"], "node rank 0 is claimed by both", 2),
    (["--rdzv-id", "other"], "other", 2),
])
def test_bad_joiner_is_refused_and_good_ones_go_on(tmp_path, bad, needle, code):
    ranks = tmp_path / "ranks"
    # The good job waits for its second node, so the bad joiner meets a live rendezvous.
    good = Agents(1, ["--nnodes", "2", "--nproc-per-node", "1", "--node-rank", "0",
                      "--no-python", FAKE, f"ranks={ranks}", "sleep=1"])
    wait_job_exists(good.port, "test")
    args = [str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{good.port}", "--nnodes", "2",
            "--nproc-per-node", "1", "--rdzv-host", "false",
            *(["--rdzv-id", "test"] if "--rdzv-id" not in bad else []), *bad,
            "--no-python", str(FAKE)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, env=muster_env())
    assert r.returncode == code, r.stderr[-2000:]
    assert needle in r.stderr, r.stderr[-2000:]
    # The server still serves the good job: its second node joins and it completes.
    second = subprocess.run([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{good.port}",
                             "--rdzv-id", "test", "--nnodes", "2", "--nproc-per-node", "1",
                             "--rdzv-host", "false", "--no-python", str(FAKE),
                             f"ranks={ranks}", "sleep=1"],
                            capture_output=True, text=True, timeout=60, env=muster_env())
    assert second.returncode == 0, second.stderr[-2000:]
    for rc, _, err in good.wait():
        assert rc == 0, err[-2000:]
    assert len(rank_rows(ranks)) == 2


def test_wrong_and_missing_token(tmp_path):
    ranks = tmp_path / "ranks"
    env_good = muster_env(MUSTER_TOKEN="s3cret")
    good = Agents(2, ["--nnodes", "2", "--nproc-per-node", "1", "--no-python", FAKE,
                      f"ranks={ranks}", "sleep=2"], env=env_good)
    for env in (muster_env(MUSTER_TOKEN="wrong"), muster_env()):
        r = subprocess.run([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{good.port}",
                            "--rdzv-id", "test", "--nnodes", "2", "--rdzv-host", "false",
                            "--rdzv-conf", "join_timeout=5s", "--no-python", str(FAKE)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2, r.stderr[-2000:]
        assert "token" in r.stderr.lower(), r.stderr[-2000:]
        assert "s3cret" not in r.stderr
    for rc, _, err in good.wait():
        assert rc == 0, err[-2000:]
        assert "s3cret" not in err


def test_unresolvable_endpoint_exits_138_after_join_timeout():
    t0 = time.monotonic()
    r = subprocess.run([str(MUSTER), "run", "--rdzv-endpoint", "no-such-host.invalid:29400",
                        "--nnodes", "2", "--rdzv-conf", "join_timeout=3s", "--no-python",
                        str(FAKE)], capture_output=True, text=True, timeout=60, env=muster_env())
    assert r.returncode == 138, r.stderr[-2000:]
    assert "no-such-host.invalid" in r.stderr
    assert 2.5 < time.monotonic() - t0 < 15


def test_muster_serve_and_status(tmp_path):
    """A standalone `muster serve` outlives the job; `muster status` shows phase, nodes,
    ranks, restart history and root cause."""
    with serve("--rdzv-id", "sj") as port:
        common = ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "sj", "--nnodes", "2",
                  "--max-restarts", "1", "--restart-policy", "ExitCode", "--no-python", str(FAKE),
                  "sleep=1",
                  "if-attempt=0", "if-global-rank=1", "exit=137", "sleep=1", "if-attempt=1",
                  "if-global-rank=0", "exit=3", "sleep=5"]
        agents = [subprocess.Popen([str(MUSTER), "run", *common], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=muster_env())
                  for _ in range(2)]
        status = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "sj"]

        def snapshot():
            r = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=20)
            return json.loads(r.stdout) if r.returncode == 0 else None

        running = wait_for(lambda: (s := snapshot()) and s["phase"] == "Running" and s, 20,
                           what="phase Running")
        assert sorted(n["group_rank"] for n in running["nodes"]) == [0, 1]
        for rc in (a.wait(60) for a in agents):
            assert rc == 3
        final = snapshot()
        assert final["phase"] == "Failed" and final["restarts_used"] == 1
        assert final["history"][0]["counted"] and final["history"][0]["failure"]["code"] == 137
        assert final["root_cause"]["rank"] == 0 and final["root_cause"]["code"] == 3
        table = subprocess.run(status, capture_output=True, text=True, timeout=20).stdout
        assert "job sj: Failed" in table and "outcome: exit 3" in table
        # Without --rdzv-id: the server's jobs, a line each.
        listing = subprocess.run([*status[:4], "--json"], capture_output=True, text=True,
                                 timeout=20, env=muster_env())
        jobs = json.loads(listing.stdout)["jobs"]
        assert [(j["run_id"], j["phase"], j["outcome"]["exit_code"]) for j in jobs] == \
            [("sj", "Failed", 3)], listing.stdout
        listing = subprocess.run(status[:4], capture_output=True, text=True, timeout=20,
                                 env=muster_env())
        assert re.search(r"^sj\s+Failed\s+\d+\s+\d+/2\s+1/1\s+exit 3: ", listing.stdout,
                         re.M), listing.stdout
        # The same run id again: refused, naming the fix.
        again = subprocess.run([str(MUSTER), "run", *common], capture_output=True, text=True,
                               timeout=60, env=muster_env())
        assert again.returncode == 2, again.stderr[-2000:]
        assert "start the new job with another --rdzv-id" in again.stderr, again.stderr[-2000:]
    unknown = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                              "--rdzv-id", "sj", "--timeout", "2"], capture_output=True,
                             text=True, timeout=30)
    assert unknown.returncode == 138 and "127.0.0.1" in unknown.stderr


# gRPC's own log line format: severity letter, MMDD, time, thread id, file:line].
RAW_GRPC_LINE = re.compile(r"^[EWID]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]", re.M)


def test_two_agents_on_one_host_print_no_raw_grpc_line():
    """Both agents try to serve the endpoint (it is this host); the one that loses the bind
    joins. gRPC's 'No address added' error line (1.5 KB, raw) used to reach the console;
    now it goes through spdlog at debug level (issue 14 item 7). The agents' shared port
    (issue 14 item 2) binds before gRPC would, so a second `muster serve` on a taken port
    shows gRPC's own line."""
    agents = Agents(2, ["--nnodes", "2", "--nproc-per-node", "1", "--no-python", FAKE,
                        "exit=0"])
    errs = ""
    for rc, _, err in agents.wait(60):
        assert rc == 0, err[-2000:]
        assert not RAW_GRPC_LINE.search(err), err[-2000:]
        errs += err
    assert "is served by another process; joining it" in errs, errs[-3000:]
    with serve() as port:
        r = subprocess.run([str(MUSTER), "serve", "--port", str(port), "--log-level", "debug"],
                           capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode != 0, r.stderr[-2000:]
    assert not RAW_GRPC_LINE.search(r.stderr), r.stderr[-2000:]
    assert "grpc: " in r.stderr and "No address added" in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("value,code", [("1.5s", 138), ("800ms", 138), ("2", 138),
                                        ("0", 2), ("soon", 2), ("-1s", 2)])
def test_status_timeout_is_a_duration(value, code):
    """`muster status --timeout` takes durations as every other flag does (issue 14 item 10);
    a server that is not there is 138 within the time given, a bad value 2 naming it."""
    with serve() as port:
        pass  # a port nobody listens on any more
    t0 = time.monotonic()
    r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "x", "--timeout", value], capture_output=True, text=True,
                       timeout=30, env=muster_env())
    assert r.returncode == code, r.stderr
    if code == 2:
        assert f"--timeout: '{value}' is not a positive duration" in r.stderr, r.stderr
    else:
        assert time.monotonic() - t0 < 10, r.stderr


def test_status_watch_prints_each_transition_once(tmp_path):
    with serve() as port:
        common = ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "w", "--nnodes", "3",
                  "--max-restarts", "1", "--restart-policy", "ExitCode", "--no-python", str(FAKE),
                  "sleep=1",
                  "if-attempt=0", "if-global-rank=1", "exit=137", "sleep=1", "if-attempt=1",
                  "if-global-rank=2", "exit=5", "sleep=5"]
        first = subprocess.Popen([str(MUSTER), "run", *common], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=muster_env())
        wait_job_exists(port, "w")  # the job exists once a node joined
        watch = subprocess.Popen([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                  "--rdzv-id", "w", "--watch", "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=muster_env())
        others = [subprocess.Popen([str(MUSTER), "run", *common], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=muster_env())
                  for _ in range(2)]
        for a in [first, *others]:
            assert a.wait(60) == 5
        out, err = watch.communicate(timeout=30)
        assert watch.returncode == 0, err
        docs = [json.loads(line) for line in out.splitlines()]
        phases = [d["phase"] for d in docs]
        # Each snapshot differs from the one before it; the story is complete and in order.
        assert all(a != b for a, b in zip(out.splitlines(), out.splitlines()[1:]))
        compact = [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
        assert compact[0] == "Pending" and compact[-1] == "Failed", phases
        assert "Running" in compact and "Restarting" in compact
        assert compact.index("Restarting") < len(compact) - 1
        final = docs[-1]
        assert final["restarts_used"] == 1 and final["root_cause"]["code"] == 5
        assert [h["failure"]["code"] for h in final["history"] if "failure" in h][0] == 137


def test_serve_and_status_read_the_token_file(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with serve("--token-file", token) as port:
        status = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
                  "none", "--timeout", "5"]
        ok = subprocess.run([*status, "--token-file", str(token)], capture_output=True,
                            text=True, timeout=30, env=muster_env())
        assert ok.returncode == 1 and "no job" in ok.stderr, ok.stderr  # authenticated
        bad = subprocess.run(status, capture_output=True, text=True, timeout=30,
                             env=muster_env())
        assert bad.returncode == 138 and "token" in bad.stderr, bad.stderr
        assert "s3cret" not in ok.stderr + bad.stderr


def test_serve_and_status_on_ipv6_loopback():
    """`muster serve --host ::1` listens on the IPv6 loopback and `muster status` reaches it
    at [::1]:PORT. A bare IPv6 address (or one in brackets without a port) is a host on the
    default port 29400, as for `muster run --rdzv-endpoint`, never host ':' with port 1."""
    with serve("--host", "::1") as port:
        r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"[::1]:{port}",
                            "--rdzv-id", "none", "--timeout", "5"], capture_output=True,
                           text=True, timeout=30, env=muster_env())
        assert r.returncode == 1 and "no job" in r.stderr, r.stderr
    for endpoint in ("::1", "[::1]"):
        r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", endpoint, "--rdzv-id",
                            "ipv6-nobody", "--timeout", "1"], capture_output=True, text=True,
                           timeout=30, env=muster_env())
        # Whether or not something serves port 29400 here, the query went to [::1]:29400.
        assert r.returncode in (1, 138), r.stderr
        assert "job ipv6-nobody from [::1]:29400: " in r.stderr, r.stderr


def test_operator_variables_on_one_host_node_rank_0_serves(tmp_path):
    """Two agents on one host with an operator's variables (MASTER_ADDR/MASTER_PORT,
    WORLD_SIZE = nodes, RANK = node rank): rank 1, started first, does not take the port
    that rank 0 is told to serve on; the job runs and nobody prints an error."""
    port = free_port()
    env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    cmd = [str(MUSTER), "run", "--no-python", str(FAKE), "sleep=0.5"]
    rank1 = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env(**env, RANK="1"))
    time.sleep(1.0)  # rank 1 is up first: before the fix it bound the port
    rank0 = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env(**env, RANK="0"))
    outs = [p.communicate(timeout=60) for p in (rank0, rank1)]
    for p, (_, err) in zip((rank0, rank1), outs):
        assert p.returncode == 0, err[-2000:]
        assert "cannot serve" not in err and "error" not in err.lower(), err[-2000:]


def test_status_of_a_refused_endpoint_fails_at_once():
    """Nothing listens there: `muster status` says so within a second, naming the address;
    with --timeout it waits that long for a server that may be starting."""
    port = free_port()
    t0 = time.monotonic()
    r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "x"], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    elapsed = time.monotonic() - t0
    assert r.returncode == 138, r.stderr
    assert f"nothing accepts connections on port {port} of 127.0.0.1" in r.stderr, r.stderr
    assert elapsed < 1.5, elapsed
    t0 = time.monotonic()
    r = subprocess.run([str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--timeout", "2s"], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    assert r.returncode == 138 and 1.9 < time.monotonic() - t0 < 10, r.stderr


def test_serve_forgets_a_finished_job_after_its_retention():
    """Issue 31 item 7: `muster serve` kept every job forever; with --job-retention it
    forgets a job none of whose agents has been connected for that long."""
    with serve("--job-retention", "1s") as port:
        r = subprocess.run([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{port}",
                            "--rdzv-id", "retained", "--nnodes", "1", "--no-python", str(FAKE),
                            "exit=0"], capture_output=True, text=True, timeout=60,
                           env=muster_env())
        assert r.returncode == 0, r.stderr[-3000:]
        status = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
                  "retained", "--timeout", "5"]
        kept = subprocess.run(status, capture_output=True, text=True, timeout=30,
                              env=muster_env())
        assert kept.returncode == 0 and "Succeeded" in kept.stdout, kept.stdout + kept.stderr
        wait_for(lambda: subprocess.run(status, capture_output=True, text=True, timeout=30,
                                        env=muster_env()).returncode == 1, 10, 0.2,
                 "the job to be forgotten")
