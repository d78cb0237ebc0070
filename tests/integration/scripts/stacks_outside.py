"""A worker for `muster stacks` without the hook's help (issue 17 item 1). By RANK:
0 blocks the stack signal (as a C library's thread might) and waits in C (libc's sleep
through ctypes), so the stack hook cannot answer; 1 starts 20 short Python children (as
DataLoader workers re-spawned per epoch do) and then waits in wait_here; 2 replaces itself
with /bin/sleep, a program that is not Python. Each writes its pid to $READY/<rank> when in
place. Nothing here knows about stacks."""
import ctypes
import os
import signal
import subprocess
import sys
import time


def ready():
    with open(os.path.join(os.environ["READY"], os.environ["RANK"]), "w") as f:
        f.write(str(os.getpid()))


def stuck_in_c():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN + 3])
    ready()
    ctypes.CDLL(None).sleep(120)


def wait_here(release):
    for _ in range(20):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    ready()
    while not os.path.exists(release):
        time.sleep(0.05)


rank = int(os.environ["RANK"])
if rank == 0:
    stuck_in_c()
elif rank == 1:
    wait_here(os.environ["RELEASE"])
else:
    ready()
    os.execv("/bin/sleep", ["sleep", "120"])
