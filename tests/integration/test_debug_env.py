"""Debug mode's env files hold exactly what a worker of the same job gets: the agent builds
both from one function (agent/workers/worker_specs.h), so `muster exec --rank N` reproduces a
worker, --bind-cores-to-rank's OMP_NUM_THREADS included."""
import json
import subprocess

from conftest import MUSTER, REPO, muster_env

ENVDUMP = REPO / "tests" / "integration" / "scripts" / "envdump.py"
# Different in any two runs by construction: each run's directory (which holds the error
# file, the stack hook, the preemption file and the flight recorder's dumps) and each round's fresh store port.
PER_RUN = {"TORCHELASTIC_ERROR_FILE", "MASTER_PORT", "PYTHONPATH", "MUSTER_STACKS_DIR",
           "MUSTER_STACKS_OWNER", "MUSTER_PREEMPTED",
           "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
JOB = ["--nproc-per-node", "1", "--bind-cores-to-rank", "--rdzv-id", "envcheck",
       "--max-restarts", "2", "--role", "trainer", "--no-python", "/usr/bin/python3", "-u",
       str(ENVDUMP), "--foo", "1"]


def parse_env_file(text):
    """NAME -> value of `export NAME='value'` lines ('\\'' inside a value is a quote)."""
    env = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        assert line.startswith("export ") and "='" in line and line.endswith("'"), line
        name, quoted = line[len("export "):].split("=", 1)
        env[name] = quoted[1:-1].replace("'\\''", "'")
    return env


def without(env, names):
    return {k: v for k, v in env.items() if k not in names}


def test_debug_env_files_equal_the_real_workers_env(tmp_path):
    (tmp_path / "real").mkdir()
    agent_env = muster_env(ENVDUMP_DIR=tmp_path / "real")
    r = subprocess.run([str(MUSTER), "run", *JOB], capture_output=True, text=True, timeout=60,
                       env=agent_env)
    assert r.returncode == 0, r.stderr
    real = json.loads((tmp_path / "real" / "0.json").read_text())

    # The files live as long as their agent: the debug command itself copies them and starts
    # rank 0 by hand, as a user logged into the pod would.
    debug_dir, snap = tmp_path / "debug", tmp_path / "snap"
    snap.mkdir()
    (tmp_path / "exec").mkdir()
    command = (f"cp {debug_dir}/rank-0.env {debug_dir}/rank-0.argv {snap}/ && "
               f"ENVDUMP_DIR={tmp_path / 'exec'} {MUSTER} exec --rank 0 --debug-dir {debug_dir}")
    r = subprocess.run([str(MUSTER), "run", "--debug", "--debug-dir", str(debug_dir),
                        "--debug-command", command, *JOB], capture_output=True, text=True,
                       timeout=60, env=agent_env)
    assert r.returncode == 0, r.stderr
    env_file = parse_env_file((snap / "rank-0.env").read_text())

    # What muster set for the worker (everything that differs from the agent's own
    # environment) is exactly what the env file exports, value for value.
    set_by_muster = {k: v for k, v in real["env"].items() if agent_env.get(k) != v}
    assert "OMP_NUM_THREADS" in set_by_muster  # the --bind-cores-to-rank share
    assert without(env_file, PER_RUN) == without(set_by_muster, PER_RUN | {"MUSTER_AGENT_MARK"})
    # The watchdog's mark (containment mode session only) is the agent's, not the rank's.
    # MUSTER_STACKS_OWNER: the stack hook sets it inside the worker
    # (docs/guides/hangs-and-stacks.md "Stacks").
    assert set(env_file) == set(set_by_muster) - {"MUSTER_AGENT_MARK", "MUSTER_STACKS_OWNER"}
    argv = (snap / "rank-0.argv").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in argv] == JOB[JOB.index("/usr/bin/python3"):]

    # Started by hand, rank 0 sees what the worker saw.
    by_hand = json.loads((tmp_path / "exec" / "0.json").read_text())
    per_run = PER_RUN | {"ENVDUMP_DIR", "MUSTER_AGENT_MARK"}
    assert without(by_hand["env"], per_run) == without(real["env"], per_run)
    assert by_hand["argv"] == real["argv"]
