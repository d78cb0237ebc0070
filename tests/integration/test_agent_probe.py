"""Issue 6, agent side: the GPU probe before the first rendezvous (fake driver libraries)."""
import subprocess
import time

from conftest import BUILD, MUSTER, muster_env, pid_alive

FAKES = BUILD / "tests" / "fakes"


def run(args, **fake_env):
    env = muster_env(MUSTER_LIBCUDA=FAKES / "libcuda.so.1",
                     MUSTER_LIBNVML=FAKES / "libnvidia-ml.so.1", **fake_env)
    return subprocess.run([str(MUSTER), "run", *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=env)


def test_nproc_gpu_uses_the_probe_count():
    r = run(["--nproc-per-node", "gpu", "--no-python", "/bin/sh", "-c",
             "echo $LOCAL_RANK/$LOCAL_WORLD_SIZE"], FAKE_GPU_COUNT=4)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == [f"[default{i}]:{i}/4" for i in range(4)]
    assert "GPU probe: 4 GPUs healthy" in r.stderr


def test_stale_gpu_is_refused_naming_the_pid():
    r = run(["--nproc-per-node", "1", "--no-python", "true"], FAKE_GPU_COUNT=2,
            FAKE_PROCS="1:999999:ghost:1024")
    assert r.returncode == 138, r.stderr
    assert "pid 999999" in r.stderr and "no longer exists" in r.stderr


def test_stale_gpu_policy_kill_kills_the_holder():
    holder = subprocess.Popen(["sleep", "60"])
    try:
        r = run(["--stale-gpu-policy", "kill", "--nproc-per-node", "1", "--no-python", "true"],
                FAKE_GPU_COUNT=1, FAKE_PROCS=f"0:{holder.pid}:python:1024")
        holder.wait(5)
        assert not pid_alive(holder.pid)
        assert f"SIGKILL to pid {holder.pid}" in r.stderr
        # The fake keeps listing the pid (a real driver would not): refused after one retry.
        assert r.returncode == 138, r.stderr
    finally:
        holder.kill()


def test_no_gpu_and_no_driver():
    r = run(["--nproc-per-node", "gpu", "--no-python", "true"], FAKE_GPU_COUNT=0)
    assert r.returncode == 2 and "no GPU" in r.stderr
    plain = subprocess.run([str(MUSTER), "run", "--nproc-per-node", "gpu", "--no-python", "true"],
                           capture_output=True, text=True, timeout=30, env=muster_env())
    assert plain.returncode == 2 and "--nproc-per-node" in plain.stderr
    auto = subprocess.run([str(MUSTER), "run", "--nproc-per-node", "auto", "--no-python", "true"],
                          capture_output=True, text=True, timeout=30, env=muster_env())
    assert auto.returncode == 0, auto.stderr  # falls back to the CPU count, like torchrun


def test_hung_driver_is_cut_off_by_the_timeout():
    t0 = time.monotonic()
    r = run(["--probe-timeout", "1s", "--nproc-per-node", "1", "--no-python", "true"],
            FAKE_HANG="cuInit")
    assert r.returncode == 138, r.stderr
    assert time.monotonic() - t0 < 15


def test_probe_summary_reaches_the_job_status(tmp_path):
    """Issue 7: each node's GPU probe summary is part of the job status (muster status)."""
    import json

    from multinode import serve
    with serve("--rdzv-id", "gpus") as port:
        common = ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "gpus", "--nnodes", "2",
                  "--rdzv-host", "false", "--nproc-per-node", "1", "--no-python", "sleep", "3"]
        envs = [muster_env(MUSTER_LIBCUDA=FAKES / "libcuda.so.1",
                           MUSTER_LIBNVML=FAKES / "libnvidia-ml.so.1", FAKE_GPU_COUNT=2),
                muster_env()]  # the second node has no driver
        agents = [subprocess.Popen([str(MUSTER), "run", *common], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env) for env in envs]
        status = [str(MUSTER), "status", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id",
                  "gpus"]
        deadline = time.monotonic() + 30
        doc = None
        while time.monotonic() < deadline:
            r = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=20)
            if r.returncode == 0 and len((doc := json.loads(r.stdout))["nodes"]) == 2:
                break
            time.sleep(0.2)
        assert doc and len(doc["nodes"]) == 2, doc
        probes = sorted(n["probe"] for n in doc["nodes"])
        assert probes[1].startswith("2 x NVIDIA H100"), probes
        assert "driver 580.65.06" in probes[1], probes
        assert probes[0] in ("", "no NVIDIA driver"), probes
        table = subprocess.run(status, capture_output=True, text=True, timeout=20).stdout
        assert "gpu: 2 x NVIDIA H100" in table, table
        for a in agents:
            _, err = a.communicate(timeout=60)
            assert a.returncode == 0, err[-2000:]
