"""Issue 14 item 1: a torchrun command line runs unchanged. Every torchrun flag is accepted
with torchrun's meaning (argparse's forms too: -t3, --nproc) or refused with exit 2 and what
to use instead, before anything starts."""
import json

import pytest

from conftest import fake, muster_env, run_muster

# Writes this worker's environment and argv to <dir>/<RANK>.json and says hello.
SCRIPT = """\
import json, os, sys
out = os.path.join(sys.argv[1], os.environ["RANK"] + ".json")
with open(out, "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv, "name": __name__}, f)
print("hello from rank", os.environ["RANK"])
"""


def test_torchrun_command_line_with_its_newer_flags_runs_unchanged(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    logs = tmp_path / "logs"
    r = run_muster([
        "--standalone", "--nnodes=1", "--nproc", "2", "--rdzv_backend=c10d",
        "--rdzv_id=job-x",
        "--rdzv-conf", "keep_alive_interval=2,keep_alive_max_attempt=4,store_type=tcp,use_libuv=1",
        "--max_restarts=0", "--monitor_interval=0.1", "--start_method=forkserver",
        "--event_log_handler=console", "--role=trainer", "--run_path", "--log_dir", logs, "-t3",
        "--local_ranks_filter=0", "--log_line_prefix_template=[${role_name}${local_rank}]:",
        "--signals_to_handle=SIGTERM,SIGINT", "--shutdown_timeout=5",
        script, tmp_path, "--lr", "0.1"])
    assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"{rank}.json").read_text())
        assert seen["name"] == "__main__"
        assert seen["argv"][1:] == [str(tmp_path), "--lr", "0.1"]
        env = seen["env"]
        assert env["LOCAL_RANK"] == str(rank) and env["WORLD_SIZE"] == "2", env
        assert env["TORCHELASTIC_RUN_ID"] == "job-x" and env["ROLE_NAME"] == "trainer", env
    # -t3 with --local_ranks_filter=0: rank 0 on the console and in its file, rank 1 in its
    # file only.
    assert "[trainer0]:hello from rank 0" in r.stdout, r.stdout
    assert "hello from rank 1" not in r.stdout, r.stdout
    (rank1_log,) = logs.glob("job-x_*/attempt_0/1/stdout.log")
    assert "hello from rank 1" in rank1_log.read_text()


def test_virtual_local_rank_gives_every_worker_local_rank_0_and_its_own_gpu(tmp_path):
    actions = []
    for rank in range(3):
        actions += [f"if-global-rank={rank}", f"envdump={tmp_path / f'env{rank}'}"]
    r = run_muster(["--virtual-local-rank", "--nproc-per-node", "3", "--probe", "off",
                    *fake(*actions)],
                   env=muster_env(CUDA_VISIBLE_DEVICES="5,6,7"))
    assert r.returncode == 0, r.stderr
    for rank in range(3):
        env = dict(line.split("=", 1)
                   for line in (tmp_path / f"env{rank}").read_text().splitlines())
        assert env["RANK"] == str(rank), env
        assert env["LOCAL_RANK"] == "0", env
        assert env["CUDA_VISIBLE_DEVICES"] == str(5 + rank), env
        assert env["LOCAL_WORLD_SIZE"] == "3", env


def test_virtual_local_rank_without_cuda_visible_devices_numbers_the_gpus(tmp_path):
    env = muster_env()
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = run_muster(["--virtual_local_rank", "--nproc-per-node", "2", "--probe", "off",
                    *fake("if-global-rank=1", f"envdump={tmp_path / 'env1'}")], env=env)
    assert r.returncode == 0, r.stderr
    seen = dict(line.split("=", 1) for line in (tmp_path / "env1").read_text().splitlines())
    assert (seen["LOCAL_RANK"], seen["CUDA_VISIBLE_DEVICES"]) == ("0", "1"), seen


@pytest.mark.parametrize("flags,env,message", [
    (["--logs-specs", "my_specs"], {}, "--logs-specs: names a Python LogsSpecs plugin"),
    (["--numa_binding", "node", "--probe", "off"], {}, "--probe off leaves muster no list of GPUs"),
    (["--duplicate-stdout-filters", "loss"], {}, "muster does not copy matching lines"),
    (["--duplicate_stderr_filters=error"], {}, "--log-dir DIR and -t 3"),
    (["--print-completion", "bash"], {}, "muster has no shell completion script"),
    (["--rdzv-backend", "etcd"], {}, "etcd needs --rdzv-endpoint HOST:2379"),
    (["--rdzv_backend=etcd-v2"], {}, "etcd needs --rdzv-endpoint"),
    (["--rdzv-conf", "cacert=/ca.pem"], {}, "cacert: is for --rdzv-backend etcd"),
    (["--event-log-handler", "scuba"], {}, "--event-log FILE"),
    (["--start-method", "thread"], {}, "must be spawn, fork or forkserver"),
    (["--virtual-local-rank", "--nproc-per-node", "2", "--probe", "off"],
     {"CUDA_VISIBLE_DEVICES": "5"}, "which lists 1 device for 2 workers"),
    (["--log", "x"], {}, "is ambiguous: it could be --log-dir, --log-line-prefix-template"),
])
def test_refused_torchrun_forms_exit_2_before_anything_starts(tmp_path, flags, env, message):
    stamp = tmp_path / "stamp"
    r = run_muster([*flags, *fake(f"stamp={stamp}")], env=muster_env(**env))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr
    assert not stamp.exists()


def test_help_lists_torchruns_newer_flags():
    r = run_muster(["--help"])
    assert r.returncode == 0
    for flag in ("--virtual-local-rank", "--start-method", "--run-path", "--event-log-handler",
                 "--logs-specs", "--numa-binding", "--duplicate-stdout-filters",
                 "--print-completion"):
        assert flag in r.stdout, flag
