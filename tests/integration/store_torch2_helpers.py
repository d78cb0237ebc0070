"""Store client/server programs for test_store_torch2.py.

Run as a script by torch 2.15 (the scripts/torch2_venv.sh wrapper) or by Debian's torch 1.13
(/usr/bin/python3); only the standard library and torch are imported at module level by the
script paths, so pytest can import this file too:
    store_torch2_helpers.py client HOST      # JSON on stdin: {"options": {...}, "runs": [...]}
                                             # each run {"port": p, "program": [op, ...]}
                                             # prints one result list per run (JSON)
    store_torch2_helpers.py masters N        # N torch TCPStore servers (libuv backend on 2.x);
                                             # prints "PORT p1 ... pN", serves until stdin closes
"""
import datetime
import json
import sys

DEFAULT_TIMEOUT = datetime.timedelta(seconds=20)  # every WAIT; the tests sync through WAITs


def _error(e):
    text = str(e).strip()
    return ["error", type(e).__name__, text.splitlines()[0] if text else ""]


def _decode(b):
    return b.decode("latin-1")


def _execute(store, op):
    """One operation; the returned value is what the differential test compares."""
    kind = op[0]
    ms = datetime.timedelta(milliseconds=op[-1]) if kind.endswith("_timeout") else None
    if kind == "set":
        store.set(op[1], op[2])
        return None
    if kind == "get":
        return _decode(store.get(op[1]))
    if kind == "get_timeout":  # a key nobody sets: WAIT, timeout, CANCEL_WAIT
        store.set_timeout(ms)
        try:
            return _decode(store.get(op[1]))
        finally:
            store.set_timeout(DEFAULT_TIMEOUT)
    if kind == "add":
        return store.add(op[1], op[2])
    if kind == "compare_set":
        return _decode(store.compare_set(op[1], op[2], op[3]))
    if kind == "check":
        return store.check(op[1])
    if kind == "wait":
        store.wait(op[1])
        return "ok"
    if kind == "wait_timeout":
        store.wait(op[1], ms)
        return "no timeout"
    if kind == "delete_key":
        return store.delete_key(op[1])
    if kind == "num_keys":
        return store.num_keys()
    if kind == "append":
        store.append(op[1], op[2])
        return None
    if kind == "multi_get":
        return [_decode(v) for v in store.multi_get(op[1])]
    if kind == "multi_set":
        store.multi_set(op[1], op[2])
        return None
    if kind == "queue_push":
        store.queue_push(op[1], op[2])
        return None
    if kind == "queue_pop":
        return _decode(store.queue_pop(op[1], block=op[2]))
    if kind == "queue_pop_timeout":  # blocking pop of an empty queue
        store.set_timeout(ms)
        try:
            return _decode(store.queue_pop(op[1], block=True))
        finally:
            store.set_timeout(DEFAULT_TIMEOUT)
    if kind == "queue_len":
        return store.queue_len(op[1])
    if kind == "list_keys":
        return sorted(store.list_keys())
    if kind == "barrier":
        store.barrier(op[1], op[2])
        return "ok"
    if kind == "barrier_timeout":
        store.barrier(op[1], op[2], ms)
        return "no timeout"
    raise ValueError(f"unknown op {kind}")


def _connect(host, port, options):
    import torch.distributed as dist
    kwargs = {}
    if "use_libuv" in options:
        kwargs["use_libuv"] = options["use_libuv"]
    return dist.TCPStore(host, port, options.get("world_size"), False, DEFAULT_TIMEOUT, **kwargs)


def _client_main(host, request):
    out = []
    for run in request["runs"]:
        results = []
        try:
            store = _connect(host, run["port"], request.get("options", {}))
        except Exception as e:  # noqa: BLE001 - reported, compared
            out.append([["connect", _error(e)]])
            continue
        for op in run["program"]:
            try:
                r = _execute(store, op)
            except Exception as e:  # noqa: BLE001 - the outcome is part of the result
                r = _error(e)
            results.append([op[0], r])
        del store
        out.append(results)
    print(json.dumps(out))


def _masters_main(n):
    import torch.distributed as dist
    kwargs = {"use_libuv": True} if "use_libuv" in (dist.TCPStore.__init__.__doc__ or "") else {}
    stores = [dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300), **kwargs)
              for _ in range(n)]
    print("PORT " + " ".join(str(s.port) for s in stores), flush=True)
    sys.stdin.read()  # until the test closes stdin or terminates us


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")  # the CUDA-stub UserWarning of the CPU-only torch 2 venv
    if sys.argv[1] == "client":
        _client_main(sys.argv[2], json.loads(sys.stdin.read()))
    elif sys.argv[1] == "masters":
        _masters_main(int(sys.argv[2]))
    else:
        raise SystemExit(f"usage: {sys.argv[0]} client HOST | masters N")
