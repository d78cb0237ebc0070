"""Plays the agent's side of the warm template's protocol (launch/warm_template.py,
launch/warm_source.cc) without muster, for what a test cannot reach through `muster run` on
this machine: a rank asked for a cgroup namespace (muster asks only on a cgroup2 mounted
with nsdelegate). test_warm_start.py runs it as root.

  warm_template_driver.py PYTHON SCRIPT LEAF NAMESPACE

Becomes a child subreaper, starts the template (importing nothing), asks it for one rank
running SCRIPT with cgroup_namespace=NAMESPACE ("1"/"0"), moves the rank into the cgroup2
directory LEAF (as the agent writes cgroup.procs) before the go byte, and exits with the
rank's exit code; the rank's stdout is this process's.
"""
import ctypes
import json
import os
import socket
import sys

python, script, leaf, namespace = sys.argv[1:5]
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
source = open(os.path.join(repo, "launch", "warm_template.py")).read()
loader = "import sys; exec(compile(sys.argv.pop(1), '<muster warm template>', 'exec'))"
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: the rank comes to us

env = ["%s=%s" % kv for kv in os.environ.items()]
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
template = os.fork()
if template == 0:
    ours.close()
    os.dup2(theirs.fileno(), 3)
    os.execve(python, [python, "-u", "-c", loader, source, "3", json.dumps(env)],
              dict(os.environ))
theirs.close()
assert ours.recv(64) == b"ready"
go_ours, go_rank = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
request = {"argv": [python, "-u", script], "env": env, "cwd": os.getcwd(),
           "new_session": True, "cpus": [], "agent_pid": os.getpid(),
           "cgroup_namespace": namespace == "1"}
socket.send_fds(ours, [json.dumps(request).encode()], [1, 2, go_rank.fileno()])
go_rank.close()
answer = ours.recv(4096).decode()
assert answer.startswith("pid "), answer
rank = int(answer[4:])
with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
    f.write(str(rank))
go_ours.send(b"g")
_, status = os.waitpid(rank, 0)
ours.close()  # EOF: the template exits
os.waitpid(template, 0)
sys.exit(os.waitstatus_to_exitcode(status))
