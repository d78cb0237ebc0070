"""Acceptance 8: a worker flooding stdout neither stalls its sibling's lines nor grows the
agent's memory. Also: whole lines only, prefixes, redirects and rank filters."""
import subprocess
import threading
import time

import pytest

from conftest import MUSTER, fake, muster_env, run_muster


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


@pytest.mark.serial
def test_flood_does_not_delay_sibling_or_grow_agent():
    flood_bytes = 200 * 1024 * 1024
    agent = subprocess.Popen(
        [str(MUSTER), "run", "--nproc-per-node", "2",
         *fake("if-rank=0", f"flood={flood_bytes}", "if-rank=1", "tick-ms=1000",
               "if-rank=1", "tick=5")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=muster_env())
    lags, total, peak_rss = [], 0, 0
    stop = threading.Event()

    def sample_rss():
        nonlocal peak_rss
        while not stop.is_set():
            peak_rss = max(peak_rss, rss_kb(agent.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample_rss)
    sampler.start()
    tail = b""
    while True:
        chunk = agent.stdout.read1(1 << 20)
        if not chunk:
            break
        now = time.monotonic_ns()
        total += len(chunk)
        data = tail + chunk
        start = 0
        while (i := data.find(b"[default1]:tick ", start)) >= 0:
            end = data.find(b"\n", i)
            if end < 0:
                break
            stamp = int(data[i:end].split()[2])
            lags.append((now - stamp) / 1e6)
            start = end + 1
        cut = data.rfind(b"\n")
        tail = data[max(cut + 1, start):]
    agent.wait(timeout=60)
    stop.set()
    sampler.join()
    assert agent.returncode == 0, agent.stderr.read()[-2000:]
    assert total >= flood_bytes, total
    assert len(lags) == 5, lags
    # Every slow line arrives promptly even while 200 MB stream past it.
    assert max(lags) < 250, f"sibling lines delayed: {lags} ms"
    assert peak_rss < 50 * 1024, f"agent RSS peaked at {peak_rss} kB"


def test_lines_are_never_spliced():
    r = run_muster(["--nproc-per-node", "4", *fake("flood=2000000")], timeout=60)
    assert r.returncode == 0
    for line in r.stdout.splitlines():
        assert line.startswith("[default") and line.endswith("x" * 10), line[:80]


def test_redirect_tee_and_filter(tmp_path):
    r = run_muster(["--nproc-per-node", "3", "--log-dir", tmp_path, "-r", "0:1",
                    "--local-ranks-filter", "0,1", *fake("print=hello")])
    assert r.returncode == 0
    assert "[default0]" not in r.stdout  # redirected to its file only
    assert "[default1]:hello" in r.stdout
    assert "[default2]" not in r.stdout  # filtered from the console
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for rank in range(3):
        assert (run_dir / "attempt_0" / str(rank) / "stdout.log").read_text() == "hello\n"
    r = run_muster(["--nproc-per-node", "1", "--log-line-prefix-template", "<${rank}@${role_name}> ",
                    "--role", "trainer", *fake("print=x")])
    assert r.stdout == "<0@trainer> x\n"


def test_descriptors_the_agent_inherits_do_not_reach_workers(tmp_path):
    # Issue 18 finding 8: a caller's fds (a shell's 251, a CI runner's pipes) are not
    # close-on-exec; a worker holding one keeps the caller waiting for EOF. The worker lists
    # its shell's table (`; true` keeps ls a child instead of exec'ing it).
    script = f"exec 251</dev/null 10</dev/null; exec {MUSTER} run --no-python -- " \
             "sh -c 'ls -v /proc/$$/fd; true'"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env=muster_env(TMPDIR=tmp_path))
    assert r.returncode == 0, r.stderr
    fds = [line.split(":", 1)[1] for line in r.stdout.splitlines()
           if line.startswith("[default0]:")]
    assert fds == ["0", "1", "2"], r.stdout
