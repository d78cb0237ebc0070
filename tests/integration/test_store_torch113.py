"""Differential and end-to-end tests of c10d_store_server with real torch 1.13 clients.

Run with Debian's interpreter (it has torch 1.13):
    MUSTER_BUILD_DIR=build /usr/bin/python3 -m pytest tests/integration/test_store_torch113.py
"""
import os
import random
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import store_helpers  # noqa: E402

NUM_CLIENTS = 3
OPS_PER_CLIENT = 60

pytestmark = [
    pytest.mark.skipif(not store_helpers.server_binary().exists(),
                       reason=f"{store_helpers.server_binary()} is not built "
                              "(build target c10d_store_server, set MUSTER_BUILD_DIR)"),
    pytest.mark.skipif(not store_helpers.torch_available(),
                       reason=f"{store_helpers.TORCH_PYTHON} cannot import torch.distributed "
                              "(Debian python3-torch 1.13 is required)"),
]


def _stoll_ok(value):
    """Whether std::stoll accepts `value` (torch's ADD on an existing key)."""
    import re
    return re.match(r"^[ \t\n\v\f\r]*[+-]?[0-9]", value) is not None


class ClientProgram:
    """One client's op list, built from random steps, and the model of its private keys."""

    def __init__(self, rng, c):
        self.rng, self.c = rng, c
        self.prefix = prefix = f"c{c}/"
        self.keys = [f"{prefix}k{i}" for i in range(5)]
        self.counters = [f"{prefix}n{i}" for i in range(3)]
        self.model = {}  # the keys of this client that exist, with their values
        self.ops = []
        self.never = 0

    def value(self):
        rng = self.rng
        return rng.choice(["", "x", "7", " -12", "12abc", "\u00e9t\u00e9",
                           "v" * rng.randint(1, 3000), str(rng.randint(-99, 99))])

    def random_op(self):
        """Appends one random op (maybe none); False if the step is skipped altogether."""
        rng, ops, model, keys, counters = self.rng, self.ops, self.model, self.keys, self.counters
        kind = rng.choice(["set", "set", "get", "add", "add", "compare_set",
                           "delete_key", "wait", "wait_timeout", "shared_add"])
        if kind == "set":
            k, v = rng.choice(keys), self.value()
            ops.append(["set", k, v])
            model[k] = v
        elif kind == "get":
            present = [k for k in keys + counters if k in model]
            if present:
                ops.append(["get", rng.choice(present)])
        elif kind == "add":
            k = rng.choice(counters + [k for k in keys if _stoll_ok(model.get(k, "0"))])
            if k in model and not _stoll_ok(model[k]):
                return False
            delta = rng.choice([1, -1, 0, 5, 10**12, -(10**12)])
            ops.append(["add", k, delta])
            model[k] = "0"  # some number; the model only needs "parses as one"
        elif kind == "compare_set":
            k = rng.choice(keys)
            cur = model.get(k)
            expected = rng.choice(["", cur if cur is not None else "", "nope"])
            desired = self.value()
            ops.append(["compare_set", k, expected, desired])
            if cur is None and expected == "":
                model[k] = desired
            elif cur is not None and cur == expected:
                model[k] = desired
        elif kind == "delete_key":
            k = rng.choice(keys + counters)
            ops.append(["delete_key", k])
            model.pop(k, None)
        elif kind == "wait":
            present = [k for k in keys + counters if k in model]
            if present:
                ops.append(["wait", rng.sample(present, min(len(present), 3))])
        elif kind == "wait_timeout":
            self.never += 1
            missing = [f"{self.prefix}never{self.never}"]
            if [k for k in keys if k in model]:
                missing.append(rng.choice([k for k in keys if k in model]))
            ops.append(["wait_timeout", missing, 200])
        elif kind == "shared_add":
            ops.append(["add", "shared/counter", rng.randint(1, 9)])
            ops[-1].append("unordered")
        return True

    def finish(self):
        """Barrier 1, then client 0 counts keys while the others wait for its answer."""
        c, ops = self.c, self.ops
        ops.append(["set", f"sync1/{c}", "1"])
        ops.append(["wait", [f"sync1/{i}" for i in range(NUM_CLIENTS)]])
        if c == 0:
            ops.append(["num_keys"])
            ops.append(["add", "shared/counter", 0])
            ops.append(["set", "sync/counted", "1"])
        else:
            ops.append(["wait", ["sync/counted"]])
            ops.append(["get", "shared/counter"])
        for k in self.keys + self.counters:
            if k in self.model:
                ops.append(["get", k])


def make_programs(seed):
    """Per-client op lists whose results do not depend on how the clients interleave.

    Private keys are touched by one client only; cross-client traffic is limited to
    wake-ups (wait for a key another client sets), a shared counter read after a
    barrier, and num_keys read while everybody is parked at a barrier.
    """
    rng = random.Random(seed)
    programs = []
    for c in range(NUM_CLIENTS):
        client = ClientProgram(rng, c)
        for step in range(OPS_PER_CLIENT):
            if not client.random_op():
                continue
            if step == OPS_PER_CLIENT // 2:
                # Cross-client wake-up: publish ours, wait for the next client's.
                client.ops.append(["set", f"ring/{c}", "here"])
                client.ops.append(["wait", [f"ring/{(c + 1) % NUM_CLIENTS}"]])
        client.finish()
        programs.append(client.ops)
    return programs


def strip_unordered(program, results):
    """Shared-counter ADD replies depend on interleaving; keep only their presence."""
    out = []
    for op, (kind, r) in zip(program, results):
        if op[-1] == "unordered":
            r = "int" if isinstance(r, int) else r
        out.append([kind, r])
    return out


SEEDS = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def differential():
    """Every seed against both servers in one go: torch 1.13's servers in one process, one
    client process per client index running its programs of every seed in order (one torch
    import each, not one per seed and server); {seed: (programs, torch's, muster's)}."""
    programs = {seed: make_programs(seed) for seed in SEEDS}
    torch_srv = store_helpers.start_torch_server(len(SEEDS))
    ours = []
    try:
        ours = [store_helpers.start_muster_server() for _ in SEEDS]
        runs = [[] for _ in range(NUM_CLIENTS)]
        for i, seed in enumerate(SEEDS):
            for port in (torch_srv.ports[i], ours[i].port):
                for c in range(NUM_CLIENTS):
                    prog = [op[:-1] if op[-1] == "unordered" else op for op in programs[seed][c]]
                    runs[c].append({"port": port, "program": prog})
        raw = store_helpers.run_client_runs(runs)
        assert torch_srv.alive(), "torch 1.13 server died during the run"
        for s in ours:
            assert s.alive(), "server died during the run"
    finally:
        torch_srv.stop()
        for s in ours:
            s.stop()
    out = {}
    for i, seed in enumerate(SEEDS):
        per = [[strip_unordered(programs[seed][c], raw[c][2 * i + k]) for c in range(NUM_CLIENTS)]
               for k in (0, 1)]
        out[seed] = (programs[seed], per[0], per[1])
    # The reference is torch's own server and client: under CI's load its client has timed
    # out on an ordinary op (2 fresh-clone runs: "Socket Timeout" on delete_key, on add,
    # while muster's answer was right). Such a seed's torch side runs again (twice at
    # most); muster's results are compared with the rerun, never excused.
    for _ in range(2):
        flaky = [seed for seed in SEEDS if reference_timed_out(out[seed][1])]
        if not flaky:
            break
        print(f"torch 1.13's own server timed out on an ordinary op for seeds {flaky}: "
              f"running torch's side of them again")
        again = torch_side(programs, flaky)
        for seed in flaky:
            out[seed] = (programs[seed], again[seed], out[seed][2])
    return out


def reference_timed_out(expected):
    return any(kind != "wait_timeout" and r == ["error", "RuntimeError", "Socket Timeout"]
               for res in expected for kind, r in res)


def torch_side(programs, seeds):
    """torch 1.13's results of `seeds` on a fresh torch server: {seed: per-client results}."""
    srv = store_helpers.start_torch_server(len(seeds))
    try:
        runs = [[] for _ in range(NUM_CLIENTS)]
        for i, seed in enumerate(seeds):
            for c in range(NUM_CLIENTS):
                prog = [op[:-1] if op[-1] == "unordered" else op for op in programs[seed][c]]
                runs[c].append({"port": srv.ports[i], "program": prog})
        raw = store_helpers.run_client_runs(runs)
        assert srv.alive(), "torch 1.13 server died during the rerun"
    finally:
        srv.stop()
    return {seed: [strip_unordered(programs[seed][c], raw[c][i]) for c in range(NUM_CLIENTS)]
            for i, seed in enumerate(seeds)}


@pytest.mark.parametrize("seed", SEEDS)
def test_same_results_as_torch_113_server(differential, seed):
    programs, expected, actual = differential[seed]
    timeouts = [r for res in expected for kind, r in res if kind == "wait_timeout"]
    assert timeouts and all(r[0] == "error" for r in timeouts), timeouts
    gets = [r for res in expected for kind, r in res if kind in ("get", "compare_set")]
    assert len(set(map(str, gets))) > 5, "the sequence should read back varied values"
    for c, (e, a) in enumerate(zip(expected, actual)):
        for i, (eo, ao) in enumerate(zip(e, a)):
            assert eo == ao, f"client {c} op {i} {programs[c][i]}: torch {eo} vs muster {ao}"
        assert len(e) == len(a)


WORKER = textwrap.dedent("""
    import datetime, json, os, torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1)] * 4)
    dist.all_reduce(t)
    dist.barrier()
    g = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(g, torch.tensor([float(rank)]))
    print(json.dumps({"rank": rank, "sum": t.tolist(), "gather": [x.item() for x in g]}))
    dist.destroy_process_group()
""")


def test_gloo_all_reduce_with_agent_store():
    server = store_helpers.start_muster_server()
    world = 4
    try:
        procs = []
        for rank in range(world):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(server.port),
                       RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                       TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                       OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([store_helpers.TORCH_PYTHON, "-c", WORKER], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        deadline = time.monotonic() + 120
        outputs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                pytest.fail("workers did not finish within 120 s")
            assert p.returncode == 0, err
            outputs.append(out)
        import json
        results = sorted((json.loads(o.strip().splitlines()[-1]) for o in outputs),
                         key=lambda r: r["rank"])
        assert [r["rank"] for r in results] == list(range(world))
        for r in results:
            assert r["sum"] == [10.0] * 4
            assert r["gather"] == [0.0, 1.0, 2.0, 3.0]
        assert server.alive()
    finally:
        rc = server.stop()
    assert rc == 0, f"server exit code {rc}: {server.stderr}"
