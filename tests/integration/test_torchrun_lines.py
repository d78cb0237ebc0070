"""Issue 28: torchrun command lines from public projects, each run under torchrun 2.15 and
under muster with only the launcher word changed (`python -m torch.distributed.run` ->
`muster run`, `python -m torch.distributed.launch` -> `muster launch`): the same exit code,
the same attempts and ranks, the same arguments and LOCAL_RANK for every worker. Then what a
first job prints: no torch deprecation warning caused by muster's environment, no message
about workers before there are any, and agents sharing a console say which node they are.

The workers import no torch (they record what they were given), so a comparison costs
torchrun's own start (about 4 s) and muster's (milliseconds)."""
import json
import re
import signal
import subprocess

import pytest

from conftest import FAKE, MUSTER, TORCH_PYTHON, muster_env, needs_torch
from multinode import Agents, free_port, wait_job_exists

# Records this worker's argv, LOCAL_RANK and TORCHELASTIC_SIGNALS_TO_HANDLE in
# $LINES_OUT/<attempt>-<rank>.json; raises on the attempts before $SUCCEED_AT (as the
# elastic quickstart's script does when it fails), once every rank of the attempt has
# written its record (a launcher stops the others at the first failure).
WORKER = """\
import json, os, sys, time
out, attempt = os.environ["LINES_OUT"], int(os.environ["TORCHELASTIC_RESTART_COUNT"])
with open(os.path.join(out, f"{attempt}-{os.environ['RANK']}.json.tmp"), "w") as f:
    json.dump({"argv": sys.argv[1:], "local_rank": os.environ["LOCAL_RANK"],
               "signals": os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE"),
               "master_port": os.environ["MASTER_PORT"]}, f)
os.rename(f.name, f.name[:-len(".tmp")])
if attempt < int(os.environ.get("SUCCEED_AT", "0")):
    deadline = time.monotonic() + 30
    while (sum(p.startswith(f"{attempt}-") and p.endswith(".json") for p in os.listdir(out))
           < int(os.environ["WORLD_SIZE"]) and time.monotonic() < deadline):
        time.sleep(0.01)
    raise RuntimeError(f"boom on attempt {attempt}")
"""

# (name, torch's module, muster's subcommand, the launcher's flags, environment)
LINES = [
    # torchtitan's run_train.sh (timm's train.sh too): one node, any free port.
    ("torchtitan", "torch.distributed.run", "run",
     ["--nnodes=1", "--nproc_per_node=2", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0"],
     {}),
    # The elastic quickstart: --max_restarts=3 and a script that raises (twice here).
    ("elastic_quickstart", "torch.distributed.run", "run",
     ["--nnodes=1", "--nproc_per_node=2", "--max_restarts=3", "--rdzv_id=quickstart",
      "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0"], {"SUCCEED_AT": "2"}),
    # DETR's launch line, and the legacy form without --use_env (the script gets
    # --local-rank=N).
    ("detr", "torch.distributed.launch", "launch", ["--nproc_per_node=2", "--use_env"], {}),
    ("legacy_launch", "torch.distributed.launch", "launch", ["--nproc_per_node=2"], {}),
    # PyTorch's launcher tests (test/distributed/launcher/test_run.py): the rendezvous
    # settings in quotes a shell would have removed, and torchrun's default --logs-specs.
    ("pytorch_launcher_test", "torch.distributed.run", "run",
     ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
      "--rdzv-conf='join_timeout=5,last_call_timeout=1,timeout=5'", "--logs-specs=default",
      "--max-restarts=0"], {}),
]


def _run_line(argv, out, env_extra, python):
    out.mkdir()
    env = muster_env(LINES_OUT=out, PYTHON_EXEC=python, **env_extra)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    seen = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return r, seen


@pytest.mark.parametrize("name,module,subcommand,flags,env", LINES, ids=[x[0] for x in LINES])
def test_torchrun_line_behaves_as_under_torchrun(tmp_path, torch2_python, name, module,
                                                 subcommand, flags, env):
    script = tmp_path / "train.py"
    script.write_text(WORKER)
    theirs, their_workers = _run_line([torch2_python, "-m", module, *flags, script],
                                      tmp_path / "torchrun", env, torch2_python)
    ours, our_workers = _run_line([str(MUSTER), subcommand, *flags, script],
                                  tmp_path / "muster", env, torch2_python)
    assert theirs.returncode == 0, theirs.stderr[-3000:]  # the line works under torchrun
    assert ours.returncode == theirs.returncode, ours.stderr[-3000:]
    # The same attempts of the same ranks, each with torchrun's arguments and LOCAL_RANK.
    assert sorted(our_workers) == sorted(their_workers), (our_workers, their_workers)
    for key, theirs_seen in their_workers.items():
        mine = our_workers[key]
        for field in ("argv", "local_rank", "signals"):
            assert mine[field] == theirs_seen[field], (key, field, mine, theirs_seen)
        assert int(mine["master_port"]) > 0, mine
    attempts = 1 + int(env.get("SUCCEED_AT", "0"))
    assert len(our_workers) == 2 * attempts, our_workers
    if name == "legacy_launch":
        assert {w["argv"][-1] for w in our_workers.values()} == {"--local-rank=0",
                                                                 "--local-rank=1"}
    # A key torchrun ignores is no error; no key is unknown here once the quotes are off.
    assert "warning" not in ours.stderr, ours.stderr


@needs_torch
def test_launch_spells_local_rank_as_torch_113_does(tmp_path):
    """torch 1.13's torch.distributed.launch passes --local_rank=N (the dashed form came with
    2.0): muster launch follows the torch its workers import."""
    script = tmp_path / "train.py"
    script.write_text(WORKER)
    r, seen = _run_line([str(MUSTER), "launch", "--nproc_per_node=2", script],
                        tmp_path / "muster", {}, TORCH_PYTHON)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {k: w["argv"] for k, w in seen.items()} == {"0-0": ["--local_rank=0"],
                                                      "0-1": ["--local_rank=1"]}, seen


def test_several_nodes_refuse_port_0_with_the_reason(tmp_path):
    stamp = tmp_path / "stamp"
    r = subprocess.run([str(MUSTER), "run", "--nnodes=2", "--rdzv_backend", "c10d",
                        "--rdzv_endpoint=localhost:0", "--no-python", str(FAKE),
                        f"stamp={stamp}"], capture_output=True, text=True, timeout=30,
                       env=muster_env())
    assert r.returncode == 2, r.stderr
    assert "--rdzv-endpoint: port 0 (any free port) works for a one-node job only" in r.stderr
    assert not stamp.exists()


@pytest.mark.parametrize("store", ["agent", "rank0"])
def test_master_port_0_on_one_node_is_a_free_port(tmp_path, store):
    dump = tmp_path / "env"
    r = subprocess.run([str(MUSTER), "run", "--master-port", "0", "--store", store,
                        "--no-python", str(FAKE), f"envdump={dump}"], capture_output=True,
                       text=True, timeout=30, env=muster_env())
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in dump.read_text().splitlines())
    assert 0 < int(env["MASTER_PORT"]) < 65536, env["MASTER_PORT"]


def test_unknown_rdzv_conf_keys_are_ignored_with_one_warning(tmp_path):
    stamp = tmp_path / "stamp"
    r = subprocess.run([str(MUSTER), "run", "--rdzv-conf", "colour=blue,size=3,join_timeout=5",
                        "--no-python", str(FAKE), f"stamp={stamp}"], capture_output=True,
                       text=True, timeout=30, env=muster_env())
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "ignoring keys" in line]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith("muster run: warning: --rdzv-conf: ignoring keys 'colour', "
                                  "'size'"), warnings
    assert stamp.exists()


# Real torch 2.15 workers (gloo): torch prints "Environment variable X is deprecated" once
# per rank for an old name it still reads; muster sets only the names this torch reads.
ALLREDUCE = """\
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
dist.destroy_process_group()
names = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
         "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
print("sum", int(t.item()), *(f"{n}={os.environ.get(n)}" for n in names))
"""


def test_torch2_workers_print_no_deprecation_warning(tmp_path, torch2_python):
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    r = subprocess.run([str(MUSTER), "run", "--nproc-per-node", "2", script],
                       capture_output=True, text=True, timeout=120,
                       env=muster_env(PYTHON_EXEC=torch2_python))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("sum 2 TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_TRACE_BUFFER_SIZE=None "
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 NCCL_ASYNC_ERROR_HANDLING=None") \
        == 2, r.stdout
    assert "deprecated" not in r.stdout + r.stderr, r.stderr[-3000:]


def test_sigint_before_any_worker_says_so(tmp_path):
    port = free_port()
    agent = subprocess.Popen([str(MUSTER), "run", "--nnodes", "2", "--rdzv-endpoint",
                              f"127.0.0.1:{port}", "--rdzv-id", "early", "--no-python",
                              str(FAKE), f"stamp={tmp_path / 'stamp'}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=muster_env())
    try:
        wait_job_exists(port, "early")  # joined, waiting for the second node
        agent.send_signal(signal.SIGINT)
        _, err = agent.communicate(timeout=30)
    finally:
        agent.kill()
    assert agent.returncode == 130, err
    assert "received SIGINT before any worker started: leaving the job" in err, err
    assert "forwarding it to every worker" not in err, err


def test_agents_sharing_a_console_name_their_node(tmp_path):
    agents = Agents(2, ["--nnodes", "2", "--no-python", FAKE, "exit=0"],
                    per_agent=lambda i: ["--node-rank", i])
    nodes = set()
    for rc, _, err in agents.wait():
        assert rc == 0, err[-3000:]
        last = err.strip().splitlines()[-1]
        m = re.match(r"\[muster \S+ \S+ info node (\d)\] job succeeded", last)
        assert m, last
        nodes.add(m.group(1))
    assert nodes == {"0", "1"}
