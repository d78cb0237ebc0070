"""Issue 17 item 3: workers get torch's flight recorder settings (the TORCH_FR_ names of
torch 2.15 and the TORCH_NCCL_ ones older torch reads: both when the workers' torch is
unknown, else the one it reads, issue 28) unless the user set either name,
with the dump files in the attempt's directory; a failure's root cause names the dump
files found there; on a failure the dumps of every node are collected into the log dir of
the process serving the rendezvous and every agent's last line says where."""
import json
import pathlib
import re
import socket
import subprocess

from conftest import MUSTER, REPO, muster_env, run_muster
from multinode import free_port, serve

PY = "/usr/bin/python3"
WRITE_ENV = ("import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))")
# A failing rank that leaves a dump where torch would (prefix + rank), as NCCL's watchdog
# does on a collective timeout.
FAIL_WITH_DUMP = ("import os; p = (os.environ.get('TORCH_FR_DUMP_TEMP_FILE') or"
                  " os.environ['TORCH_NCCL_DEBUG_INFO_TEMP_FILE']) + os.environ['RANK'];"
                  " open(p, 'wb').write(b'trace'); raise SystemExit(3)")


def test_workers_get_the_settings_and_a_user_value_wins(tmp_path):
    out = tmp_path / "env.json"
    # A command that is no Python interpreter: the workers' torch is unknown, so both names.
    r = run_muster(["--log-dir", tmp_path / "logs", "--no-python", "/bin/sh", "-c",
                    f'exec {PY} -c "$0" "$1"', WRITE_ENV, out],
                   env=muster_env(TORCH_NCCL_DUMP_ON_TIMEOUT="0"))
    assert r.returncode == 0, r.stderr[-2000:]
    env = json.loads(out.read_text())
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    prefix = env["TORCH_FR_DUMP_TEMP_FILE"]
    assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == prefix
    assert re.fullmatch(re.escape(str(tmp_path / "logs")) + r"/none_\w+/attempt_0/"
                        r"flight_recorder_rank_", prefix), prefix
    # The user's choice, in the older spelling, wins over both spellings.
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0"
    assert "TORCH_FR_DUMP_ON_TIMEOUT" not in env


def test_root_cause_names_the_dump_files(tmp_path):
    r = run_muster(["--log-dir", tmp_path / "logs", "--nproc-per-node", "1", "--no-python", PY,
                    "-c", FAIL_WITH_DUMP])
    assert r.returncode == 3, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    m = re.search(r"flight recorder traces: (\S+)\)", last)
    assert m, last
    assert m.group(1).endswith("/attempt_0/flight_recorder_rank_0")
    with open(m.group(1), "rb") as f:
        assert f.read() == b"trace"
    # One node says where its round's dumps are as a job of many nodes does (its attempt
    # folder: nothing is copied); seen missing on an H100 with NCCL's own watchdog dump.
    where = re.search(r"flight recorder traces of 1 node \(1 file\) in [^:\s]+:(\S+/attempt_0/)",
                      last)
    assert where, last
    assert pathlib.Path(where.group(1), "flight_recorder_rank_0").read_bytes() == b"trace"


# ---- every node's dumps collected in one place (docs/guides/collective-traces.md) ----
# Real torch 2.x gloo workers, 2 nodes x 2 ranks: each rank has torch write its flight
# recorder dump at the prefix muster gave (gloo writes none on its own on CPU: see
# scripts/fr_dump_worker.py), then rank 3 fails. Every node's dumps must end up, byte for
# byte, in the log dir of the process that serves the rendezvous, and every agent's last
# line must say where.
FR_WORKER = REPO / "tests" / "integration" / "scripts" / "fr_dump_worker.py"


def fr_job(python, tmp_path, endpoint_args=()):
    """Starts the 2-node job; returns the agents' Popen objects."""
    env = muster_env(PYTHON_EXEC=python, FAIL_RANK="3")
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-id", "test", *endpoint_args,
              FR_WORKER]
    return [subprocess.Popen([str(MUSTER), "run", "--log-dir", str(tmp_path / f"logs{i}"),
                              "--event-log", str(tmp_path / f"events{i}.jsonl"),
                              *map(str, common)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for i in range(2)]


def wait_failed(procs):
    results = [(p.wait(60), p.stderr.read()) for p in procs]
    for rc, err in results:
        assert rc == 1, err[-3000:]
    return [err for _, err in results]


def originals(tmp_path):
    """Each rank's dump where torch wrote it, on its own node: {file name: bytes}."""
    files = sorted(tmp_path.glob("logs*/*/attempt_0/flight_recorder_rank_*"),
                   key=lambda f: f.name)
    assert [f.name for f in files] == [f"flight_recorder_rank_{r}" for r in range(4)], files
    data = {f.name: f.read_bytes() for f in files}
    for name, b in data.items():
        assert b.startswith(b"\x80") and b"gloo:all_reduce" in b, name  # torch's pickled trace
    return data


def assert_collected(round_dir, tmp_path):
    collected = sorted(round_dir.glob("*/flight_recorder_rank_*"), key=lambda f: f.name)
    assert [f.name for f in collected] == [f"flight_recorder_rank_{r}" for r in range(4)], \
        collected
    assert len({f.parent for f in collected}) == 2  # one folder per node
    want = originals(tmp_path)
    for f in collected:
        assert f.read_bytes() == want[f.name], f


def test_every_nodes_dumps_are_collected_by_the_serving_agent(tmp_path, torch2_python):
    port = free_port()
    procs = fr_job(torch2_python, tmp_path, ["--rdzv-endpoint", f"127.0.0.1:{port}"])
    errs = wait_failed(procs)
    # One of the two agents served the rendezvous; the dumps are in its run dir only.
    (round_dir,) = tmp_path.glob("logs*/*/traces/round1")
    assert_collected(round_dir, tmp_path)
    where = f"{socket.gethostname()}:{round_dir}/"
    for err in errs:
        last = err.strip().splitlines()[-1]
        assert f"flight recorder traces of 2 nodes (4 files) in {where}" in last, last
    for i in range(2):
        events = [json.loads(line) for line in (tmp_path / f"events{i}.jsonl").open()]
        got = [e for e in events if e["event"] == "traces_collected"]
        assert got and got[-1]["location"] == where and got[-1]["files"] == 4, got


def test_muster_serve_keeps_the_dumps_and_status_lists_them(tmp_path, torch2_python):
    with serve("--log-dir", tmp_path / "srv") as port:
        errs = wait_failed(fr_job(torch2_python, tmp_path,
                                  ["--rdzv-endpoint", f"127.0.0.1:{port}"]))
        round_dir = tmp_path / "srv" / "traces" / "test" / "round1"
        assert_collected(round_dir, tmp_path)
        where = f"{socket.gethostname()}:{round_dir}/"
        for err in errs:
            assert f"flight recorder traces of 2 nodes (4 files) in {where}" in \
                err.strip().splitlines()[-1]
        q = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "test"]
        s = json.loads(subprocess.run(q + ["--json"], capture_output=True, text=True,
                                      timeout=20, env=muster_env(), check=True).stdout)
        (traces,) = s["traces"]
        assert traces["round"] == 1 and traces["location"] == where
        assert sorted(f.rsplit("/", 1)[1] for n in traces["nodes"] for f in n["files"]) == \
            [f"flight_recorder_rank_{r}" for r in range(4)]
        text = subprocess.run(q, capture_output=True, text=True, timeout=20,
                              env=muster_env()).stdout
        assert f"flight recorder traces of round 1: 2 nodes (4 files) in {where}" in text, text


def test_serve_log_dir_that_cannot_be_made_exits_2(tmp_path):
    (tmp_path / "file").write_text("")
    r = subprocess.run([str(MUSTER), "serve", "--port", "0", "--log-dir", tmp_path / "file"],
                       capture_output=True, text=True, timeout=20, env=muster_env())
    assert r.returncode == 2, r.stderr
    assert "--log-dir" in r.stderr and "give a writable directory" in r.stderr, r.stderr
