"""Output streams like a terminal: a partial line (a prompt, a `\\r` progress bar) reaches
the console with its rank prefix while the worker still runs, and Python workers run
unbuffered (PYTHONUNBUFFERED=1 unless the user set it), whoever adds the interpreter."""
import os
import subprocess
import threading
import time

import pytest

from conftest import MUSTER, TORCH_PYTHON, muster_env, run_muster


def agent_env(**extra):
    env = muster_env(**extra)
    if "PYTHONUNBUFFERED" not in extra:
        env.pop("PYTHONUNBUFFERED", None)  # this machine sets it globally
    return env


class TimedOutput:
    """Runs `muster run ARGS`, reading its stdout as it comes: (monotonic ns, bytes)."""

    def __init__(self, args, env):
        self.agent = subprocess.Popen([str(MUSTER), "run", *map(str, args)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.chunks = []
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self):
        fd = self.agent.stdout.fileno()
        while chunk := os.read(fd, 1 << 16):
            self.chunks.append((time.monotonic_ns(), chunk))

    def wait(self, timeout=60):
        self.agent.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return self.agent.returncode

    def text(self):
        return b"".join(c for _, c in self.chunks).decode()

    def arrival_ns(self, needle):
        """When the console had printed `needle` (the chunk that completed it)."""
        seen = b""
        for stamp, chunk in self.chunks:
            seen += chunk
            if needle.encode() in seen:
                return stamp
        raise AssertionError(f"{needle!r} never printed; console: {self.text()!r}")


def python_worker(script):
    return ["--no-python", TORCH_PYTHON, "-c", script]


# The worker stamps what it writes with CLOCK_MONOTONIC (time.monotonic_ns here too).
PROGRESS = """
import sys, time
sys.stdout.write(f"progress {time.monotonic_ns()} 1\\r"); sys.stdout.flush()
time.sleep(1)
sys.stdout.write(f"progress {time.monotonic_ns()} 2\\r\\n"); sys.stdout.flush()
"""
PARTIAL = """
import sys, time
sys.stdout.write(f"loss {time.monotonic_ns()}"); sys.stdout.flush()
time.sleep(1)
sys.stdout.write(" 0.5\\n"); sys.stdout.flush()
"""


def lag_s(out, line_start):
    """Seconds between the worker's stamp in the line starting `line_start` and the
    console printing that stamp."""
    text = out.text()
    i = text.index(line_start) + len(line_start)
    stamp = text[i:].split()[0]
    return (out.arrival_ns(line_start + stamp) - int(stamp)) / 1e9


@pytest.mark.serial
def test_carriage_return_progress_is_shown_while_the_worker_sleeps():
    out = TimedOutput(["--nproc-per-node", "1", *python_worker(PROGRESS)], agent_env())
    assert out.wait() == 0, out.agent.stderr.read()
    assert lag_s(out, "[default0]:progress ") < 0.5, out.chunks
    lines = out.text().splitlines()
    assert [ln.rsplit(" ", 1)[1] for ln in lines] == ["1", "2"], lines
    assert all(ln.startswith("[default0]:progress ") for ln in lines), lines


@pytest.mark.serial
def test_partial_line_is_shown_then_continued_with_the_prefix():
    out = TimedOutput(["--nproc-per-node", "1", *python_worker(PARTIAL)], agent_env())
    assert out.wait() == 0, out.agent.stderr.read()
    assert lag_s(out, "[default0]:loss ") < 0.5, out.chunks
    lines = out.text().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[default0]:loss "), lines
    assert lines[1] == "[default0]: 0.5", lines


def test_partial_lines_of_two_ranks_are_never_glued():
    script = ("import sys, time, os; r = os.environ['LOCAL_RANK']\n"
              "for i in range(3):\n"
              "    sys.stdout.write(f'r{r}-{i}'); sys.stdout.flush(); time.sleep(0.6)\n"
              "    sys.stdout.write(f'-end{r}\\n'); sys.stdout.flush()\n")
    r = run_muster(["--nproc-per-node", "2", *python_worker(script)], env=agent_env())
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert sorted(lines) == sorted([f"[default{r}]:r{r}-{i}" for r in "01" for i in range(3)] +
                                   [f"[default{r}]:-end{r}" for r in "01" for _ in range(3)])


# Prints a stamped line, then works for 2 s before exiting.
SLOW_SCRIPT = "import time\nprint('hello', time.monotonic_ns())\ntime.sleep(2)\n"


@pytest.mark.parametrize("form", ["script", "pod"])
def test_python_line_appears_before_the_worker_exits(tmp_path, form):
    script = tmp_path / "script.py"
    script.write_text(SLOW_SCRIPT)
    # "script": muster adds the interpreter (PYTHON_EXEC -u); "pod": the user's command
    # starts with python (a Pod's `muster run -- python train.py`), run as given.
    command = [script] if form == "script" else ["--", TORCH_PYTHON, script]
    out = TimedOutput(["--nproc-per-node", "1", *command], agent_env())
    assert out.wait() == 0, out.agent.stderr.read()
    assert lag_s(out, "[default0]:hello ") < 1.0, out.chunks


@pytest.mark.parametrize("user_value,worker_sees", [(None, "1"), ("0", "0"), ("", "")])
def test_pythonunbuffered_is_set_unless_the_user_set_it(user_value, worker_sees):
    extra = {} if user_value is None else {"PYTHONUNBUFFERED": user_value}
    r = run_muster(["--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                    'echo "PYU=${PYTHONUNBUFFERED-unset}"'], env=agent_env(**extra))
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[default{i}]:PYU={worker_sees}" for i in "01"]


def test_redirect_and_tee_files_get_the_raw_bytes(tmp_path):
    script = "import sys\nsys.stdout.write('a\\rb\\r\\nc'); sys.stdout.flush()\n"
    r = run_muster(["--nproc-per-node", "2", "--log-dir", tmp_path, "-r", "0:1", "-t", "1:1",
                    *python_worker(script)], env=agent_env())
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["[default1]:a", "[default1]:b", "[default1]:c"]
    logs = sorted(tmp_path.glob("*/attempt_0/*/stdout.log"))
    assert [p.read_bytes() for p in logs] == [b"a\rb\r\nc"] * 2, logs
