"""B2 baseline worker: H torch DynamicRendezvousHandlers (c10d backend) as threads of one process.

Run by bench/b2_torch_baseline.py under the Python of the torch version being measured:

    python rdzv_torch_load.py PORT RUN_ID M H CAP_S

Each handler gets its own TCPStore client (one connection, as one torchrun agent has) wrapped
in CountingStore, which counts the store API calls and value bytes the handler makes; the
handlers are created (and their clients connected) before the clock. Protocol with the
driver: print "READY", read one line ("GO") from stdin, then every thread calls
next_rendezvous() (min = max nodes = M) and the process prints one JSON line: per handler
the monotonic start/end of the call (CLOCK_MONOTONIC, comparable across processes), rank,
world size, op counts, or its error; and the process's CPU time from GO to the report.
Threads still inside the call CAP_S seconds after GO are reported as unfinished; the process
then _exits (heartbeat threads do not stop).
"""
import datetime
import json
import os
import sys
import threading
import time

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler


def _bytes(v):
    # torch 2.x's Python-store trampoline hands values over as lists of ints.
    return bytes(v) if isinstance(v, list) else v


class CountingStore(dist.Store):
    """Delegates to a TCPStore client; counts calls per op and the value bytes moved."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.lock = threading.Lock()
        self.ops = {}
        self.bytes = 0
        self.cas_failed = 0

    def reset(self):
        with self.lock:
            self.ops, self.bytes, self.cas_failed = {}, 0, 0

    def snapshot(self):
        with self.lock:
            return dict(self.ops), self.bytes, self.cas_failed

    def _count(self, op, nbytes=0, cas_failed=False):
        with self.lock:
            self.ops[op] = self.ops.get(op, 0) + 1
            self.bytes += nbytes
            self.cas_failed += cas_failed

    def set(self, key, value):
        value = _bytes(value)
        self._count("set", len(value))
        return self.inner.set(key, value)

    def get(self, key):
        v = self.inner.get(key)
        self._count("get", len(v))
        return v

    def add(self, key, value):
        self._count("add")
        return self.inner.add(key, value)

    def compare_set(self, key, expected, desired):
        expected, desired = _bytes(expected), _bytes(desired)
        v = self.inner.compare_set(key, expected, desired)
        desired_b = desired.encode() if isinstance(desired, str) else desired
        self._count("compare_set", len(desired) + len(v), cas_failed=v != desired_b)
        return v

    def wait(self, keys, timeout=None):
        self._count("wait")
        return self.inner.wait(keys) if timeout is None else self.inner.wait(keys, timeout)

    def check(self, keys):
        self._count("check")
        return self.inner.check(keys)

    def delete_key(self, key):
        self._count("delete_key")
        return self.inner.delete_key(key)

    def num_keys(self):
        self._count("num_keys")
        return self.inner.num_keys()

    def set_timeout(self, timeout):
        return self.inner.set_timeout(timeout)


def main():
    port, run_id, m, h, cap = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                               int(sys.argv[4]), float(sys.argv[5]))
    params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{port}", run_id=run_id,
                                  min_nodes=m, max_nodes=m, join_timeout=str(int(cap) + 60),
                                  last_call_timeout="1")
    stores, handlers = [], []
    for _ in range(h):
        client = dist.TCPStore("127.0.0.1", port, is_master=False,
                               timeout=datetime.timedelta(seconds=cap + 60))
        cs = CountingStore(client)
        handlers.append(create_handler(cs, C10dRendezvousBackend(cs, run_id), params))
        stores.append(cs)
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        os._exit(3)
    for cs in stores:
        cs.reset()  # the backend's constructor did one compare_set of its own
    results = [None] * h

    def agent(i):
        t0 = time.monotonic()
        try:
            r = handlers[i].next_rendezvous()
            t1 = time.monotonic()
            rank, world = (r.rank, r.world_size) if hasattr(r, "rank") else (r[1], r[2])
            ops, nbytes, cas_failed = stores[i].snapshot()
            results[i] = {"t0": t0, "t1": t1, "rank": rank, "world": world, "ops": ops,
                          "bytes": nbytes, "cas_failed": cas_failed}
        except Exception as e:  # reported per agent; the driver counts them as errors
            results[i] = {"t0": t0, "error": f"{type(e).__name__}: {e}"[:300]}

    threads = [threading.Thread(target=agent, args=(i,), daemon=True) for i in range(h)]
    cpu0 = time.process_time()
    go = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, go + cap - time.monotonic()))
    out = [r if r is not None else {"unfinished": True} for r in results]
    print(json.dumps({"go": go, "cpu_s": time.process_time() - cpu0, "agents": out}),
          flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
