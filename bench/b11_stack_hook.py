#!/usr/bin/python3
"""B11 (issue 17 items 1 and 5): what the stack hook muster injects into every worker costs a
Python worker's start. The hook is the sitecustomize.py a real `muster run` writes (copied out
by a worker); each run starts `PYTHON -c pass`, alternately without and with the hook
(PYTHONPATH=<hook dir>, MUSTER_STACKS_DIR, MUSTER_STACKS_SIGNAL as muster sets them), timed
from fork to exit. Target: < 5 ms added at the median.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import common as c


def hook_dir(muster, tmp):
    """Copies the hook a real agent writes into tmp/python; returns that directory."""
    out = tmp / "python"
    out.mkdir()
    r = subprocess.run([str(muster), "run", "--standalone", "--nproc-per-node", "1",
                        "--no-python", "/bin/sh", "-c",
                        f'cp "${{PYTHONPATH%%:*}}/sitecustomize.py" {out}/'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return out


def start_ms(python, env):
    """(wall ms, CPU ms) of one `python -c pass`: CPU time (user + system, from wait4) is
    what the hook adds; wall time on a shared box mostly measures the scheduler."""
    t = time.perf_counter()
    p = subprocess.Popen([python, "-c", "pass"], env=env)
    _, status, usage = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t) * 1e3
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pythons", default="/usr/bin/python3")
    args = ap.parse_args()
    muster = c.MUSTER_BUILT
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        hook = hook_dir(muster, tmp)
        plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        hooked = dict(plain, PYTHONPATH=str(hook), MUSTER_STACKS_DIR=str(tmp),
                      MUSTER_STACKS_SIGNAL="37")
        for python in args.pythons.split(","):
            python = os.path.expanduser(python)
            start_ms(python, plain)  # warm the page cache
            without, with_hook = [], []
            for _ in range(args.runs):
                without.append(start_ms(python, plain))
                with_hook.append(start_ms(python, hooked))
            for i, what in ((1, "CPU"), (0, "wall")):
                a = [x[i] for x in without]
                b = [x[i] for x in with_hook]
                m0, m1 = statistics.median(a), statistics.median(b)
                print(f"{python} {what}: {args.runs} runs each: without hook p50 {m0:.2f} ms; "
                      f"with hook p50 {m1:.2f} ms; added p50 {m1 - m0:+.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
