#!/usr/bin/python3
"""B11 (issue 17 items 1 and 5): what the stack hook muster injects into every worker costs a
Python worker's start. The hook is the sitecustomize.py a real `muster run` writes (copied out
by a worker); each run starts `PYTHON -c pass`, alternately without and with the hook
(PYTHONPATH=<hook dir>, MUSTER_STACKS_DIR, MUSTER_STACKS_SIGNAL as muster sets them), timed
from fork to exit. Target: < 5 ms added at the median.

--steady (issue 17 item 5): the hook's cost once a worker runs. Each run starts `PYTHON -c
STEADY` (a fixed pure-Python loop plus a little allocation, timed inside the process with
perf_counter, after start-up), alternately without and with the hook; the medians are
compared with the noise band: the difference between the medians of two halves of the
runs without the hook. Nothing of the hook runs between dumps, so the difference should be
inside the band.
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


STEADY = """import time
def work():
    total = 0
    for i in range(2_000_000):
        total += i % 7
    return [total] * 1000
work()
t = time.perf_counter()
for _ in range(5):
    work()
print((time.perf_counter() - t) * 1e3)
"""


def steady_ms(python, env):
    """Milliseconds of the fixed work inside one process."""
    r = subprocess.run([python, "-c", STEADY], env=env, capture_output=True, text=True,
                       check=True)
    return float(r.stdout)


def steady(python, plain, hooked, runs):
    without, with_hook = [], []
    for _ in range(runs):
        without.append(steady_ms(python, plain))
        with_hook.append(steady_ms(python, hooked))
    m0, m1 = statistics.median(without), statistics.median(with_hook)
    band = abs(statistics.median(without[0::2]) - statistics.median(without[1::2]))
    print(f"{python} steady state: {runs} runs each: without hook p50 {m0:.1f} ms; with hook "
          f"p50 {m1:.1f} ms; difference {m1 - m0:+.1f} ms ({(m1 - m0) / m0 * 100:+.2f} %); "
          f"noise band (two halves without the hook) {band:.1f} ms "
          f"({band / m0 * 100:.2f} %); spread without {min(without):.1f}-{max(without):.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pythons", default="/usr/bin/python3")
    ap.add_argument("--steady", action="store_true", help="steady state, not start-up")
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
            if args.steady:
                steady(python, plain, hooked, args.runs)
                continue
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
