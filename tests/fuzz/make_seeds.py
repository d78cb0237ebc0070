#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/{flags,rendezvous}/seed-*.

The seeds are meaningful starting points for the fuzzers (see the input formats at the top
of flags_fuzz.cc and rendezvous_fuzz.cc). Flag seeds use only raw argv words and raw
environment variables, so they keep their meaning when flags are added. Crash reproducers
(regression-*) are listed at the end, each naming the bug it caught.
Usage: tests/fuzz/make_seeds.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def flags_seed(args, env=(), cpus=8, gpus=0):
    out = bytearray([cpus - 1, gpus])
    for word in args:
        w = word.encode()
        assert len(w) < 64, word
        out += bytes([5, len(w)]) + w  # raw argv word
    for name, value in env:
        n, v = name.encode(), value.encode()
        assert len(n) < 32 and len(v) < 64
        out += bytes([7, len(n)]) + n + bytes([0xC0 + len(v)]) + v  # raw variable
    return bytes(out)


FLAGS = {
    "single-node": flags_seed(["--nproc-per-node", "4", "--no-python", "/bin/true"]),
    "elastic-endpoint": flags_seed(
        ["--nnodes=2:4", "--rdzv-endpoint", "[::1]:29400", "--rdzv_id", "job-7",
         "--max-restarts", "3", "--no_python", "--", "/bin/echo", "hi"]),
    "rdzv-conf": flags_seed(
        ["--nnodes", "2", "--rdzv-endpoint=host", "--rdzv-conf",
         "join_timeout=10s,last_call_timeout=1s,heartbeat_misses=2", "--rdzv-host",
         "true",
         "--no-python", "true"]),
    "nproc-gpu": flags_seed(["--nproc-per-node", "gpu", "--probe", "off", "-m", "pkg.train"],
                            gpus=4),
    "kubeflow-env": flags_seed(
        ["--no-python", "true"],
        [("PET_NNODES", "3"), ("PET_NODE_RANK", "1"), ("PET_MASTER_ADDR", "master-0"),
         ("PET_MASTER_PORT", "23456"), ("PET_NPROC_PER_NODE", "2")]),
    "volcano-env": flags_seed(
        ["--no-python", "true"],
        [("MASTER_ADDR", "job-master-0"), ("MASTER_PORT", "23456"), ("WORLD_SIZE", "2"),
         ("RANK", "1"), ("VC_TASK_INDEX", "1")]),
    "indexed-job": flags_seed(
        ["--nnodes", "4", "--rdzv-endpoint", "svc:29400", "--no-python", "true"],
        [("JOB_COMPLETION_INDEX", "3"), ("POD_IP", "10.0.0.3")]),
    "deepspeed": flags_seed(
        ["--bind-core-list", "0-3,8", "--local-rank-arg", "--save-pid", "/tmp/pid",
         "--hostfile", "/tmp/hostfile", "--no-python", "true"]),
    "failures-output": flags_seed(
        ["--restart-policy", "OnFailure", "--restartable-exit-codes", "130,137,143",
         "--shutdown-timeout", "1.5s", "--signals-to-handle", "SIGTERM,SIGUSR1",
         "-r", "0:1,1:2", "-t", "3", "--local-ranks-filter", "0,3", "--no-python", "true"]),
    "muster-env": flags_seed(
        ["--no-python", "true"],
        [("MUSTER_NNODES", "1:2"), ("MUSTER_RDZV_ENDPOINT", "h:1"), ("PET_MAX_RESTARTS", "2"),
         ("MUSTER_HEALTH_PORT", "0"), ("MUSTER_DEBUG", "1")]),
    "debug-mode": flags_seed(["--debug", "--debug-command", "sleep 1", "--debug-dir", "/run/x"]),
    "help-and-unknown": flags_seed(["-h", "--bogus", "--nnodes"]),
}


def rdzv_session(header, steps):
    """header bytes: min-1 (+ 4 x quarantine-after), max-min (+ 3 x spares), restarts,
    always (0: policy Always, 1: not), join timeout-1 (s), last call (x 500 ms),
    heartbeat-1 (s), misses-1, stop timeout (s)."""
    return bytes([1]) + bytes(header) + bytes(b for step in steps for b in step)


def join(slot, hint=None, local=2, spec=0):
    # op 0; spec byte (0: the job's); id byte 2: "n<slot>.<k>"; address byte 1; hint; local;
    # store port byte.
    h = 0 if hint is None else 1 + 2 * (hint + 1)
    return [0, slot, spec, 2, 1, h, local, slot]


def respond_all():
    return [9, 0, 1, 1, 1, 1, 1, 1]  # every slot answers its last event (1: success)


def advance(code):  # 0:1ms 1:100ms 2:500ms 3:1s 4:2s 5:5s 6:16s 7:61s
    return [7, 0, code]


def heartbeat(slot):
    return [1, slot]


RDZV = {
    "static-3-nodes-succeed": rdzv_session(
        [2, 0, 0, 1, 10, 1, 2, 3, 5],
        [join(0), join(1), join(2, local=4), respond_all(), advance(0)]),
    "elastic-last-call": rdzv_session(
        [1, 2, 0, 1, 10, 2, 2, 3, 5],
        [join(0), advance(2), advance(3), join(1), respond_all()]),
    "rank-hints": rdzv_session(
        [2, 0, 0, 1, 10, 1, 2, 3, 5],
        [join(0, hint=2), join(1, hint=0), join(2, hint=1), respond_all()]),
    "restart-after-failure": rdzv_session(
        [1, 0, 2, 1, 10, 1, 2, 3, 5],
        [join(0), join(1), [8, 0, 3], [8, 1, 1], respond_all(), respond_all(),
         respond_all()]),
    "node-lost-heartbeat": rdzv_session(
        [1, 1, 1, 1, 10, 1, 1, 2, 5],
        [join(0), join(1), advance(4), heartbeat(0), advance(4), respond_all(), advance(4)]),
    "join-while-running": rdzv_session(
        [1, 2, 0, 1, 10, 0, 2, 3, 5],
        [join(0), advance(0), join(1), respond_all(), join(2), respond_all()]),
    "leave-and-rejoin": rdzv_session(
        [1, 1, 0, 1, 10, 0, 2, 3, 5],
        [join(0), join(1), [5, 1, 0], join(1), respond_all(), [6, 0], respond_all()]),
    "stop-timeout": rdzv_session(
        [1, 0, 3, 1, 10, 0, 5, 3, 1],
        [join(0), join(1), [2, 0, 1, 1 + 8, 1, 1, 0], advance(3), advance(4)]),
    "join-timeout": rdzv_session([3, 0, 0, 1, 1, 0, 5, 3, 5], [join(0), advance(4)]),
    "policy-always": rdzv_session(
        [0, 0, 2, 0, 10, 0, 2, 3, 5], [join(0), respond_all(), respond_all(), respond_all()]),
    # --nnodes 1 --quarantine-after 1 --spares 1: node 0 runs, node 1 waits as the spare;
    # node 0's worker fails (respond byte 3: exit 137, restartable), its host is quarantined
    # and the spare runs round 2, which succeeds.
    "quarantine-spare-takes-over": rdzv_session(
        [0 + 4 * 1, 0 + 3 * 1, 3, 1, 10, 0, 2, 3, 5],
        [join(0), join(1), [9, 0, 3, 3, 3, 3, 3, 3], respond_all(), respond_all(),
         respond_all()]),
    "spec-mismatch": rdzv_session(
        [1, 0, 0, 1, 10, 0, 2, 3, 5], [join(0), join(1, spec=4 * 8), join(2, spec=7)]),
}

# Wire mode (first byte % 4 == 0): a ServerMessage with an Error, a JobStatusReply.
WIRE = {
    "wire-error": bytes([0]) + bytes([0x2a, 0x07, 0x08, 0x03, 0x12, 0x03]) + b"bad",
    "wire-join": bytes([4]) + bytes([0x0a, 0x0d, 0x0a, 0x03]) + b"job" +
    bytes([0x12, 0x06, 0x08, 0x01, 0x10, 0x02, 0x18, 0x01]),
}


# Reproducers of the bugs the fuzzers found, rewritten in the stable formats above; each
# fails its harness's invariants without the fix named. (libFuzzer's own crash-* files may
# be added next to them as regression-<what> as they are.)
FLAGS_REGRESSIONS = {
    # base/duration.cc: "1e300h" parsed as an infinite duration (no deadline at all).
    "infinite-duration": flags_seed(
        ["--shutdown-timeout", "1e300h", "--rdzv-conf", "join_timeout=1e300h", "--no-python",
         "true"]),
    # agent/config/conventions.cc: WORLD_SIZE=0 became --nnodes 0:0.
    "world-size-0": flags_seed(
        ["--no-python", "true"], [("MASTER_ADDR", "m"), ("WORLD_SIZE", "0"), ("RANK", "0")]),
    # agent/config/conventions.cc: MASTER_PORT=0 / 70000 became the rendezvous port.
    "master-port-0": flags_seed(
        ["--no-python", "true"],
        [("MASTER_ADDR", "m"), ("MASTER_PORT", "0"), ("WORLD_SIZE", "2"), ("RANK", "0")]),
    "master-port-70000": flags_seed(
        ["--no-python", "true"],
        [("MASTER_ADDR", "m"), ("MASTER_PORT", "70000"), ("WORLD_SIZE", "2"), ("RANK", "1")]),
}

ONE_NODE = [0, 0, 0, 1, 10, 0, 2, 3, 5]
RDZV_REGRESSIONS = {
    # rendezvous/core/job.cc: a Join with local_world_size 2^28 made the server allocate a
    # record per worker (timeout / out of memory); ranks summed in int could overflow.
    "huge-local-world-size": rdzv_session(
        ONE_NODE, [[0, 0, 0, 2, 1, 0, 0xF0, 0x10, 0, 0, 0, 0]]),
    # rendezvous/core/job.cc: a first Join with --nnodes 1:0 created a job that "ran" a
    # round of no nodes forever.
    "nnodes-1-0": rdzv_session(ONE_NODE, [[0, 0, 32, 2, 1, 2, 1, 0, 2, 0]]),
    # rendezvous/core/job.cc: WorkerFailed with code 0 ended the job with exit code 0.
    "failure-code-0": rdzv_session(ONE_NODE, [join(0), [2, 0, 1, 7, 1, 1, 0]]),
    # rendezvous/core/job.cc: WorkersStarted with rank 5 for local rank 0 rewrote the
    # worker's rank in the status, against the round's layout (rank 0).
    "reported-rank": rdzv_session(ONE_NODE, [join(0), [10, 0, 1, 1, 6, 0, 1]]),
}


def write(target, prefix, inputs):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in inputs.items():
        with open(os.path.join(d, prefix + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("flags", "seed-", FLAGS)
    write("flags", "regression-", FLAGS_REGRESSIONS)
    write("rendezvous", "seed-", {**RDZV, **WIRE})
    write("rendezvous", "regression-", RDZV_REGRESSIONS)
