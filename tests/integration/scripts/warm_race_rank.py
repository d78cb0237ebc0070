"""A rank for the --warm-start race loops (tests/integration/test_warm_start_races.py): appends
"RANK PID" to $STAMPS first thing, forks a child of its own (which must die with the job
too), and both sleep $SLEEP seconds (default: until killed); the rank then exits 0."""
import os
import time

with open(os.environ["STAMPS"], "a") as f:
    f.write(f"{os.environ['RANK']} {os.getpid()}\n")
seconds = float(os.environ.get("SLEEP", "600"))
child = os.fork()
if child == 0:
    time.sleep(seconds)
    os._exit(0)
time.sleep(seconds)
os.waitpid(child, 0)
