"""Time to come back after a SIGKILLed rank (tests/integration/test_warm_start.py).

Attempt 0: rank 1 prints the time and SIGKILLs itself, rank 0 waits to be stopped. Every
attempt's first line says when the script started, after `import torch`, and whether torch
was imported before the script ran (a warm rank's was)."""
import os
import signal
import sys
import time

preloaded = "torch" in sys.modules
import torch  # noqa: E402,F401  the cost a restart pays when it is not preloaded

rank, restart = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print(f"first line: restart {restart} rank {rank} at {time.time():.6f} preloaded {preloaded}")
if restart == 0 and rank == 1:
    time.sleep(0.5)  # both ranks are up
    print(f"killing at {time.time():.6f}")
    os.kill(os.getpid(), signal.SIGKILL)
if restart == 0:
    time.sleep(600)
