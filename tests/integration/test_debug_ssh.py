"""Issue 5, item 5: debug mode reached over real ssh, on simulated pods (see pods.py).

Two pods run `muster run --debug` with a two-node rendezvous; each pod's debug command is a
real OpenSSH sshd in the foreground (test-generated host key, an authorized_keys holding a
test-generated client key, a test port, no PAM, a fresh /run with /run/sshd as a pod image
would have to provide). A third pod is the user's machine: from its network namespace the
test logs in over ssh to each pod's IP and runs `muster exec --rank N -- python3
examples/allreduce.py` (python3 = TORCH_PYTHON) for all four ranks at once; the gloo
all_reduce must be correct, each session must have run in its pod, and SIGTERM to each pod's
PID 1 then ends it with 143.

Without sshd the default debug command is `sleep infinity`, and SIGTERM to the pod's PID 1
ends the pod with 143. (test_debug_deepspeed.py covers `--debug-command 'sleep infinity'`
given explicitly, outside pods; here the default lookup itself is exercised, with
/usr/sbin/sshd really absent from the pod's mount namespace.)

With sshd present, the default debug command serves ssh in a pod with a fresh /run: it
creates sshd's /run/sshd (no init system does in a container; sshd -D alone exited 255 with
"Missing privilege separation directory") and logs to stderr (-e; a pod has no syslog).
"""
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import time

import pytest

from conftest import MUSTER, REPO, TORCH_PYTHON, needs_torch, wait_for
from pods import Pods, read_text, signal_agent

SSHD = "/usr/sbin/sshd"  # the path muster's default debug command looks for
SSH_PORT = 2222
ENDPOINT = "pod0:29400"


def skip_unless_openssh():
    if not (os.access(SSHD, os.X_OK) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("SKIPPED LOUDLY: the ssh debug-mode test needs OpenSSH's sshd at "
                    f"{SSHD}, ssh and ssh-keygen; install openssh-server and openssh-client "
                    "(scripts/setup.sh does, without starting a system sshd)")
    try:
        pwd.getpwnam("sshd")
    except KeyError:
        pytest.skip("SKIPPED LOUDLY: sshd's privilege-separation user `sshd` does not exist; "
                    "reinstall openssh-server (scripts/setup.sh)")


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f",
                    str(path)], check=True, capture_output=True, timeout=30)
    return path.with_name(path.name + ".pub").read_text().strip()


def sshd_setup(d):
    """Keys and sshd_config under d; returns (debug command, client key, known_hosts)."""
    d.mkdir()
    host_pub = keygen(d / "host_key")
    client_pub = keygen(d / "client_key")
    (d / "authorized_keys").write_text(client_pub + "\n")
    (d / "authorized_keys").chmod(0o600)
    (d / "sshd_config").write_text("\n".join([
        f"Port {SSH_PORT}",
        "ListenAddress 0.0.0.0",
        f"HostKey {d / 'host_key'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",  # the test's files live under /tmp (mode 1777)
        "PidFile none",
        "PrintMotd no",
        "",
    ]))
    # A pod has its own /run; OpenSSH needs /run/sshd (root-owned, not group/world
    # writable) for privilege separation. -D: foreground, -e: log to the pod's output.
    command = (f"mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd && "
               f"exec {SSHD} -D -e -f {d / 'sshd_config'}")
    return command, d / "client_key", host_pub


def pod_output(proc):
    return read_text(proc.out_path) + read_text(proc.err_path)


def wait_exit(proc, timeout, what):
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what} still running after {timeout}s; output:\n"
                             f"{pod_output(proc)[-3000:]}") from None


@needs_torch
def test_ssh_into_debug_pods_and_exec_every_rank(tmp_path):
    skip_unless_openssh()
    command, client_key, host_pub = sshd_setup(tmp_path / "ssh")
    dirs = [tmp_path / f"debug{i}" for i in range(2)]
    # pod0, pod1: the job's pods. pod2: the user's machine, where ssh runs.
    with Pods(3, tmp_path) as pods:
        agents = [pods[i].run([MUSTER, "run", "--debug", "--debug-command", command,
                               "--debug-dir", dirs[i], "--nnodes", "2", "--nproc-per-node", "2",
                               "--node-rank", i, "--rdzv-endpoint", ENDPOINT, "--rdzv-id", "ssh",
                               REPO / "examples" / "allreduce.py"]) for i in range(2)]
        listening = f"Server listening on 0.0.0.0 port {SSH_PORT}"
        for p in agents:
            wait_for(lambda: listening in pod_output(p) or p.poll() is not None, 60,
                     what=f"sshd in {p.pod.name}")
            assert p.poll() is None, f"{p.pod.name} exited {p.returncode}:\n{pod_output(p)}"
        assert all((d / "hostfile").exists() for d in dirs)

        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("".join(f"[{pods[i].ip}]:{SSH_PORT} {host_pub}\n"
                                       for i in range(2)))
        client = pods[2]
        sessions = {}
        started = time.monotonic()
        for rank in range(4):
            pod = pods[rank // 2]
            remote = (f"hostname; cd {shlex.quote(str(REPO))} && "
                      + shlex.join([str(MUSTER), "exec", "--rank", str(rank), "--debug-dir",
                                    str(dirs[pod.index]), "--", TORCH_PYTHON,
                                    "examples/allreduce.py"]))
            sessions[rank] = (pod, subprocess.Popen(
                ["ip", "netns", "exec", client.ns, "ssh", "-F", "/dev/null", "-i",
                 str(client_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                 "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
                 "-o", "ConnectTimeout=10", "-p", str(SSH_PORT), f"root@{pod.ip}", remote],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                text=True))
        for rank, (pod, s) in sessions.items():
            try:
                out, err = s.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                s.kill()
                out, err = s.communicate()
                raise AssertionError(f"rank {rank} over ssh still running after 120s:\n{out}"
                                     f"\n{err}\n{pod.name}:\n{pod_output(agents[pod.index])}")
            assert s.returncode == 0, (f"rank {rank} over ssh to {pod.name} exited "
                                       f"{s.returncode}:\n{out}\n{err[-3000:]}\n"
                                       f"{pod_output(agents[pod.index])[-3000:]}")
            lines = out.splitlines()
            assert lines[0] == pod.name  # the session ran inside that pod
            assert f"rank {rank}/4 (local {rank % 2}," in out and "all_reduce = 10 OK" in out
        print(f"4 ranks over ssh: {time.monotonic() - started:.1f}s")
        # sshd logged each key login (proves the sessions went through this pod's sshd).
        for p in agents:
            assert pod_output(p).count("Accepted publickey for root") == 2, pod_output(p)

        # The debug command is the pod's main process: SIGTERM to PID 1 ends the pod with 143.
        # The pods form one 2-node job: when the first one's Leave reaches the server before
        # the second agent handles its own SIGTERM, the second ends as the job does, 138
        # naming the node that left (docs/design.md §4.4) - a race between two signals, not a
        # fault.
        for p in agents:
            assert p.poll() is None, pod_output(p)
            signal_agent(p, signal.SIGTERM)
        for i, p in enumerate(agents):
            rc = wait_exit(p, 30, p.pod.name)
            out = pod_output(p)
            lost = rc == 138 and i > 0 and "lost: left: agent received SIGTERM" in out
            assert rc == 143 or lost, f"{p.pod.name} exited {rc}:\n{out[-3000:]}"


def test_without_sshd_the_default_is_sleep_and_sigterm_gives_143(tmp_path):
    debug_dir = tmp_path / "debug"
    with Pods(1, tmp_path) as pods:
        # /usr/sbin is an empty tmpfs in this pod's mount namespace: sshd is absent there,
        # whatever the host has installed. Then muster (exec'd: still PID 1) runs the default.
        hide = "mount -t tmpfs tmpfs /usr/sbin && exec \"$@\""
        agent = pods[0].run(["sh", "-c", hide, "sh", MUSTER, "run", "--debug", "--debug-dir",
                             debug_dir, "--nproc-per-node", "2", "--no-python", "true"])
        wait_for(lambda: "running: sleep infinity" in pod_output(agent)
                 or agent.poll() is not None, 30, what="the debug command")
        assert agent.poll() is None, pod_output(agent)
        assert (debug_dir / "rank-1.env").exists()
        time.sleep(0.3)  # still running: sleep infinity does not end on its own
        assert agent.poll() is None, pod_output(agent)
        signal_agent(agent, signal.SIGTERM)
        rc = wait_exit(agent, 30, "pod0")
        assert rc == 143, pod_output(agent)


def test_default_debug_command_serves_ssh_in_a_pod(tmp_path):
    skip_unless_openssh()
    with Pods(1, tmp_path) as pods:
        fresh_run = 'mount -t tmpfs -o mode=755 tmpfs /run && exec "$@"'  # a container's /run
        agent = pods[0].run(["sh", "-c", fresh_run, "sh", MUSTER, "run", "--debug",
                             "--debug-dir", tmp_path / "debug", "--nproc-per-node", "1",
                             "--no-python", "true"])

        def listening():
            r = subprocess.run(["ip", "netns", "exec", pods[0].ns, "ss", "-Hltn", "sport", "=",
                                ":22"], capture_output=True, text=True, timeout=10)
            return bool(r.stdout.strip())

        wait_for(lambda: agent.poll() is not None or listening(), 30, interval=0.1,
                 what="the default debug command's sshd on port 22")
        assert agent.poll() is None, pod_output(agent)
        assert any("running: " in line and SSHD in line
                   for line in pod_output(agent).splitlines()), pod_output(agent)
        signal_agent(agent, signal.SIGTERM)
        rc = wait_exit(agent, 30, "pod0")
        assert rc == 143, pod_output(agent)
