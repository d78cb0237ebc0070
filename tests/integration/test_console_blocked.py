"""Issue 18 finding 3: a console nobody reads (a stuck log collector, a paused terminal)
never blocks the agent's loop. The agent's stdout and stderr are pipes the test does not
read; SIGTERM and a worker's exit are still handled on time, nothing outlives the agent,
and once the console moves again the agent says how much output it dropped."""
import fcntl
import os
import re
import signal
import subprocess
import termios
import threading
import time

import pytest

from conftest import (_TEST_MARK, MUSTER, TORCH_PYTHON, muster_env, pid_alive,
                      processes_with_env, wait_for)

GRACE_S = 2
SUMMARY = re.compile(rb"\[muster\] (\d+) lines? \((\d+) bytes?\) of output dropped while the "
                     rb"console was blocked\n")

# argv: PID_DIR MODES (one per local rank). flood: many lines to stderr (where Python's
# logging and tqdm write), then to stdout, then sleep. endless: stderr lines forever.
# exit3: sleep, then exit 3.
WORKER = """
import os, sys, time
pid_dir, mode = sys.argv[1], sys.argv[2].split(",")[int(os.environ["LOCAL_RANK"])]
with open(os.path.join(pid_dir, os.environ["LOCAL_RANK"]), "w") as f:
    f.write(str(os.getpid()))
if mode == "exit3":
    time.sleep(1.5)
    print("bye")
    sys.exit(3)
pad = "x" * 200
n = 20000 if mode == "flood" else 10 ** 9
for i in range(n):
    print(f"err {i} {pad}", file=sys.stderr)
for i in range(n):
    print(f"out {i} {pad}")
time.sleep(3600)
"""


class BlockedAgent:
    """`muster run` with its stdout and stderr on pipes that nobody reads until read()."""

    def __init__(self, tmp_path, modes, nproc=2):
        self.pid_dir = tmp_path
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.fds = {"out": out_r, "err": err_r}
        self.agent = subprocess.Popen(
            [str(MUSTER), "run", "--nproc-per-node", str(nproc), "--shutdown-timeout",
             f"{GRACE_S}s", "--no-python", TORCH_PYTHON, "-c", WORKER, str(tmp_path),
             ",".join(modes)],
            stdout=out_w, stderr=err_w, env=muster_env())
        os.close(out_w)
        os.close(err_w)
        self.nproc = nproc
        self.text = {"out": b"", "err": b""}
        self.readers = []

    def worker_pids(self):
        def pids():
            try:
                return [int((self.pid_dir / str(r)).read_text()) for r in range(self.nproc)]
            except (FileNotFoundError, ValueError):
                return None
        return wait_for(pids, 20, what="workers to start")

    def queued(self, name):
        buf = bytearray(4)
        fcntl.ioctl(self.fds[name], termios.FIONREAD, buf)
        return int.from_bytes(buf, "little")

    def wait_until_stderr_is_full(self):
        """Until the agent's stderr pipe holds at least half its size and takes no more for
        0.5 s. (A full pipe may hold up to a few KiB less than its size: a write that does
        not fit in the last page's room starts a new page.)"""
        half = fcntl.fcntl(self.fds["err"], 1032) // 2  # F_GETPIPE_SZ
        seen = []

        def stuck():
            seen.append(self.queued("err"))
            return len(seen) > 5 and seen[-1] >= half and len(set(seen[-6:])) == 1
        wait_for(stuck, 20, interval=0.1, what="the agent's stderr pipe to fill")

    def start_reading(self):
        def read(name):
            while chunk := os.read(self.fds[name], 1 << 16):
                self.text[name] += chunk
        for name in self.fds:
            t = threading.Thread(target=read, args=(name,), daemon=True)
            t.start()
            self.readers.append(t)

    def close(self):
        if self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait()
        for fd in self.fds.values():
            os.close(fd)


@pytest.fixture
def blocked(tmp_path):
    agents = []

    def start(modes, nproc=2):
        agents.append(BlockedAgent(tmp_path, modes, nproc))
        return agents[-1]

    yield start
    for a in agents:
        a.close()


def marked_processes():
    """Every live process this test started (muster_env()'s marker), agent included."""
    return [p for p in processes_with_env("MUSTER_TEST_MARK", _TEST_MARK["value"])
            if pid_alive(p)]


def wait_for_exit(agent, timeout):
    try:
        return agent.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def assert_nothing_left(workers):
    for pid in workers:
        assert not pid_alive(pid), f"worker pid {pid} outlived the agent"
    # The disarmed watchdog (a fork of the agent) exits on its own right after the agent.
    wait_for(lambda: not marked_processes(), 2, what="every process of the job to end")


def whole_lines(data):
    """The complete lines of `data` (a killed writer may leave the last one cut)."""
    return data.split(b"\n")[:-1]


@pytest.mark.serial
def test_sigterm_is_forwarded_while_nobody_reads_the_console(blocked):
    a = blocked(["flood", "flood"])
    workers = a.worker_pids()
    a.wait_until_stderr_is_full()
    time.sleep(1)
    t0 = time.monotonic()
    a.agent.send_signal(signal.SIGTERM)
    code = wait_for_exit(a.agent, GRACE_S + 1)
    elapsed = time.monotonic() - t0
    assert code is not None, f"agent still running {GRACE_S + 1} s after SIGTERM"
    assert code == 143
    assert elapsed < GRACE_S + 1
    assert_nothing_left(workers)
    a.start_reading()
    for t in a.readers:
        t.join(timeout=5)
    for line in whole_lines(a.text["out"]):
        assert line.startswith(b"[default"), line[:100]


@pytest.mark.serial
def test_dropped_output_is_counted_once_the_console_moves(blocked):
    a = blocked(["flood", "flood"])
    workers = a.worker_pids()
    a.wait_until_stderr_is_full()
    time.sleep(2)  # stalled: the workers' lines are dropped now, not queued
    a.start_reading()
    match = wait_for(lambda: SUMMARY.search(a.text["err"]), 10, what="the dropped-lines summary")
    assert int(match.group(1)) > 0 and int(match.group(2)) > 0
    a.agent.send_signal(signal.SIGTERM)
    assert wait_for_exit(a.agent, GRACE_S + 1) == 143
    assert_nothing_left(workers)
    for t in a.readers:
        t.join(timeout=5)
    assert b"received SIGTERM" in a.text["err"]
    for line in whole_lines(a.text["out"]):
        assert re.fullmatch(rb"\[default[01]\]:out \d+ x{200}", line), line[:100]
    for line in whole_lines(a.text["err"]):
        assert re.fullmatch(rb"\[default[01]\]:err \d+ x{200}|\[muster.*", line), line[:100]


@pytest.mark.serial
def test_worker_exit_ends_the_job_while_nobody_reads_the_console(blocked):
    t0 = time.monotonic()
    a = blocked(["exit3", "endless"])
    workers = a.worker_pids()
    # Rank 0 exits 1.5 s after it starts; rank 1 floods the stuck console meanwhile.
    code = wait_for_exit(a.agent, 1.5 + GRACE_S + 3)
    assert code is not None, "the agent never handled rank 0's exit"
    assert code == 3
    assert time.monotonic() - t0 < 1.5 + GRACE_S + 3
    assert_nothing_left(workers)
