"""Three attempts around a template that dies (tests/integration/test_warm_start.py).

Every rank prints whether torch was imported before it ran. Attempt 0: rank 1 fails once
$GO_FILE exists (the test creates it after it SIGKILLed the template); attempt 1: rank 1
fails once $GO_FILE.2 exists (the test creates it once the new template is ready); attempt
2: every rank succeeds."""
import os
import sys
import time

preloaded = "torch" in sys.modules
rank, restart = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print(f"attempt {restart} rank {rank} preloaded {preloaded}")
if restart < 2 and rank == 1:
    go = os.environ["GO_FILE"] + ("" if restart == 0 else ".2")
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(1)
if restart < 2:
    time.sleep(600)  # until the attempt is stopped
