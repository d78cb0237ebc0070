"""Acceptance 7: bad input exits 2 with a message naming the flag or variable, and starts
nothing."""
import os

import pytest

from conftest import fake, muster_env, run_muster


@pytest.mark.parametrize("args,env,needle", [
    (["--nproc-per-node", "abc", *fake()], {}, "--nproc-per-node"),
    (["--nnodes", "3:2", *fake()], {}, "--nnodes"),
    (["--max-restarts", "-1", *fake()], {}, "--max-restarts"),
    (["--no-such-flag", *fake()], {}, "--no-such-flag"),
    (["--nproc_per_nodes", "2", *fake()], {}, "did you mean --nproc-per-node?"),
    (["missing_training_script.py"], {}, "missing_training_script.py"),
    ([*fake()], {"WORLD_SIZE": "abc"}, "WORLD_SIZE"),
    ([*fake()], {"MUSTER_NPROC_PER_NODE": "many"}, "MUSTER_NPROC_PER_NODE"),
    ([*fake()], {"PET_MAX_RESTARTS": "x"}, "PET_MAX_RESTARTS"),
    (["--restart-policy", "Sometimes", *fake()], {}, "--restart-policy"),
    (["--nproc-per-node", "gpu", *fake()], {"CUDA_VISIBLE_DEVICES": ""}, "no GPU"),
    # Values are consumed whole: these were read as 1-2, 0:1 and is_host=false.
    (["--bind-core-list", "1-2-3", *fake()], {}, "--bind-core-list: '1-2-3'"),
    (["-r", "0:1:2", *fake()], {}, "--redirects: '0:1:2'"),
    (["--rdzv-conf", "is_host=maybe", *fake()], {}, "--rdzv-conf: is_host: 'maybe'"),
    ([*fake()], {"MUSTER_TEE": "0:3:1"}, "MUSTER_TEE"),
    ([*fake()], {"LOGLEVEL": "loud"}, "LOGLEVEL: 'loud' is not a log level"),
    # The run id travels in proto3 strings (UTF-8 only): refused here, not by the server.
    # "\udcff" is the byte 0xFF (os.fsencode), which is not UTF-8.
    (["--rdzv-id", "job\udcff", *fake()], {}, "--rdzv-id: 'job\\xFF' is not valid UTF-8"),
    ([*fake()], {"PET_RDZV_ID": "caf\udce9"}, "PET_RDZV_ID"),
    (["--local-addr", "10.0.0.1:29400", *fake()], {}, "--local-addr"),
    ([*fake()], {"POD_IP": "10.0.0.\udcb9"}, "POD_IP"),
])
def test_bad_input_exits_2_naming_it(args, env, needle, tmp_path):
    stamps = tmp_path / "stamps"
    if args and str(args[-1]).endswith("fake_worker"):
        args = [*args, f"stamp={stamps}"]
    r = run_muster(args, env=muster_env(**env))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert not stamps.exists(), "a worker was started despite the bad input"


def test_unwritable_log_dir_exits_2(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    # As root, permission bits do not stop us; a path under a regular file always fails.
    r = run_muster(["--log-dir", blocker / "logs", *fake()])
    assert r.returncode == 2, r.stderr
    assert "--log-dir" in r.stderr and "writable" in r.stderr


def test_log_dir_layout(tmp_path):
    r = run_muster(["--log-dir", tmp_path, "--nproc-per-node", "2",
                    *fake("print=out", "eprint=err")])
    assert r.returncode == 0, r.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for rank in range(2):
        d = run_dir / "attempt_0" / str(rank)
        assert (d / "stdout.log").read_text() == "out\n"
        assert (d / "stderr.log").read_text() == "err\n"


def test_dry_run_prints_resolved_config_and_starts_nothing(tmp_path):
    stamps = tmp_path / "stamps"
    r = run_muster(["--dry-run", "--nproc-per-node", "3", "--max-restarts", "2",
                    "--restart-policy", "ExitCode", *fake(f"stamp={stamps}")],
                   env=muster_env(PET_ROLE="trainer"))
    assert r.returncode == 0, r.stderr
    assert "nproc per node          3" in r.stdout
    assert "role                    trainer (from PET_ROLE)" in r.stdout
    assert "PET_ROLE" in r.stdout.split("env sources detected", 1)[1]
    assert "ExitCode: exit codes 130, 137, 138, 143 restart" in r.stdout
    assert "up to 2 restarts of the whole job" in r.stdout
    assert "fake_worker stamp=" in r.stdout
    assert not stamps.exists()


def test_version_and_help():
    import subprocess
    from conftest import MUSTER
    v = subprocess.run([str(MUSTER), "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("muster ")
    h = subprocess.run([str(MUSTER), "run", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--shutdown-timeout" in h.stdout and "default: 30s" in h.stdout
    u = subprocess.run([str(MUSTER), "frobnicate"], capture_output=True, text=True)
    assert u.returncode == 2 and "frobnicate" in u.stderr


def test_status_and_stacks_take_the_same_connection_flags():
    """`muster status`, `muster stacks` and `muster drain` reach the server with one flag
    list (agent/cli/job_query.h): a connection or security flag added for one is in the others,
    with the same help."""
    import subprocess
    from conftest import MUSTER

    def sections(command):
        h = subprocess.run([str(MUSTER), command, "--help"], capture_output=True, text=True,
                           timeout=30)
        assert h.returncode == 0, h.stderr
        blocks = {}
        for block in h.stdout.split("\n\n"):
            title, _, body = block.partition(":\n")
            # The flag lines only: an epilogue may follow the last group.
            blocks[title.strip()] = [line for line in body.splitlines() if line.startswith("  ")]
        return blocks

    status, stacks, drain = sections("status"), sections("stacks"), sections("drain")
    for title, flags in (("Connection", ("--rdzv-backend V", "--rdzv-conf V", "--timeout V")),
                         ("Security", ("--token-file V", "--tls-ca V"))):
        assert title in status and status[title] == stacks.get(title), (status, stacks)
        assert status[title] == drain.get(title), (status, drain)
        for flag in flags:
            assert any(flag in line for line in status[title]), status[title]


def test_command_path_that_is_not_utf8_keeps_its_exit_code_across_the_rendezvous():
    """A command that cannot start is reported to the rendezvous server ("cannot execute
    PATH" in proto3 strings, UTF-8 only). With a non-UTF-8 path the server could not parse the
    report and dropped the stream: exit 138 'the server closed it' instead of 127."""
    from multinode import free_port
    bad = "/nonexistent/no\udcffsuch"  # the byte 0xFF in the path (os.fsencode)
    r = run_muster(["--nnodes", "1:2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                    "--rdzv-id", "utf8", "--rdzv-conf", "last_call_timeout=1s",
                    "--no-python", bad], timeout=60,
                   errors="backslashreplace")  # the agent's own log shows the path as it is
    assert r.returncode == 127, (r.returncode, r.stderr[-2000:])
    assert "server closed" not in r.stderr, r.stderr[-2000:]


def test_misspelled_variable_and_oversubscription_warn_and_run(tmp_path):
    """A typo in a MUSTER_* name is not silently ignored, and more workers than CPUs (no GPU)
    is said once; both still run."""
    cpus = len(os.sched_getaffinity(0))
    n = cpus + 1
    r = run_muster(["--nproc-per-node", str(n), *fake()],
                   env=muster_env(MUSTER_MAX_RESTART="3", CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stderr
    assert ("muster run: warning: MUSTER_MAX_RESTART is not a muster variable and is ignored; "
            "did you mean MUSTER_MAX_RESTARTS (--max-restarts)?") in r.stderr, r.stderr
    assert (f"muster run: warning: --nproc-per-node {n} starts {n} workers on {cpus} CPUs and "
            "no visible GPU") in r.stderr, r.stderr
    assert r.stderr.count(f"starts {n} workers") == 1, r.stderr
