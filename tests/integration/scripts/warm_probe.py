"""What a rank can tell about how it was started (tests/integration/test_warm_start.py).

Writes $PROBE_DIR/<LOCAL_RANK>.json: its environment, sys.argv, __main__'s names, the head of
sys.path, its open fds, whether torch was imported before this script ran, its session and its parent.
With an argument `exit:HOW` it then ends that way: code7 (os._exit(7)), raise, sigkill, or
sleep (until it is stopped).
"""
import json
import os
import signal
import sys
import time

preloaded = "torch" in sys.modules


def open_fds():
    """This process's fds before the probe opens any: number and what, without numbers."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own fd, closed by now
        out.append((int(fd), "".join("N" if c.isdigit() else c for c in os.path.basename(target))))
    return sorted(out)


fds = open_fds()
import random  # noqa: E402
import numpy  # noqa: E402  (torch preloads it in a warm rank)
main = sys.modules["__main__"]
path = os.path.join(os.environ["PROBE_DIR"], os.environ["LOCAL_RANK"] + ".json")
with open(path, "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv, "name": __name__,
               "file": main.__file__, "spec": getattr(main.__spec__, "name", None),
               "path0": sys.path[0], "preloaded": preloaded, "pid": os.getpid(),
               "parent": open(f"/proc/{os.getppid()}/comm").read().strip(), "sid": os.getsid(0), "pgid": os.getpgid(0),
               "cwd": os.getcwd(), "unbuffered": not sys.stdout.line_buffering and
               sys.stdout.write_through, "cpus": sorted(os.sched_getaffinity(0)),
               "fds": fds, "random": random.random(), "numpy_random": numpy.random.random()}, f)
print(f"probe rank {os.environ['RANK']} says hello")
print(f"probe rank {os.environ['RANK']} on stderr", file=sys.stderr)
how = next((a.split(":", 1)[1] for a in sys.argv[1:] if a.startswith("exit:")), None)
if how == "code7":
    os._exit(7)
if how == "raise":
    raise RuntimeError("the probe raised")
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "sleep":
    time.sleep(600)
