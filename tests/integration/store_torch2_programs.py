"""The random store programs of test_store_torch2.py: per-client op lists whose results do not
depend on how the clients interleave, so torch 2.15's server and c10d_store_server must give
the same results op for op."""
import random
import re

NUM_CLIENTS = 3
OPS_PER_CLIENT = 50
TIMEOUT_MS = 150
# Per client: (constructor options, whether its client supports queues).
CLIENT_OPTIONS = [({"use_libuv": True}, True),
                  ({"use_libuv": True, "world_size": NUM_CLIENTS}, True),
                  ({"use_libuv": False}, False)]

_STOLL = re.compile(r"^[ \t\n\v\f\r]*([+-]?[0-9]+)")
_VALUE_KINDS = {"set", "get", "add", "compare_set", "check", "delete_key", "append", "multi_get",
                "multi_set", "check_present", "shared_add"}
_WAIT_KINDS = {"wait", "wait_timeout", "get_timeout", "barrier_timeout", "barrier_again"}


def _stoll(value):
    """std::stoll as torch's ADD applies it to an existing value; None if it would throw."""
    m = _STOLL.match(value)
    return int(m.group(1)) if m else None


class ClientProgram:
    """One client's op list, built from random steps, and the model of what the keys, queues
    and barrier keys under its prefix c<i>/ (touched by this client only) hold."""

    def __init__(self, rng, c, queues_ok):
        self.rng, self.c, self.queues_ok = rng, c, queues_ok
        self.p = p = f"c{c}/"
        self.keys = [f"{p}k{i}" for i in range(5)]
        self.counters = [f"{p}n{i}" for i in range(3)]
        self.queues = [f"{p}q{i}" for i in range(2)]
        self.model = {}  # existing value keys of this client -> value
        self.qmodel = {q: [] for q in self.queues}
        self.barriers = {}  # private barrier key -> count
        self.ops = []
        self.serial = 0
        self.kinds = ["set", "get", "add", "add", "compare_set", "check", "wait", "wait_timeout",
                      "get_timeout", "delete_key", "append", "multi_get", "multi_set",
                      "barrier_timeout", "barrier_again", "check_present", "shared_add"]
        if queues_ok:
            self.kinds += ["queue_push", "queue_push", "queue_pop", "queue_pop_timeout",
                           "queue_len"]
        else:
            self.kinds += ["queue_refused"]

    def fresh(self, what):
        self.serial += 1
        return f"{self.p}{what}{self.serial}"

    def value(self):
        rng = self.rng
        return rng.choice(["", "x", "7", " -12", "12abc", "\u00e9t\u00e9", "a\x00b",
                           "v" * rng.randint(1, 3000), str(rng.randint(-99, 99))])

    def alive(self):  # the connection must still answer after a timeout + CANCEL_WAIT
        p = self.p
        self.ops.append(["add", f"{p}alive", 1])
        self.model[f"{p}alive"] = str(int(self.model.get(f"{p}alive", "0")) + 1)

    def present(self):
        return [k for k in self.keys + self.counters if k in self.model]

    def emit(self, kind):
        """Appends the ops of one random step (maybe none)."""
        if kind in _VALUE_KINDS:
            self.emit_value_op(kind)
        elif kind in _WAIT_KINDS:
            self.emit_wait_op(kind)
        else:
            self.emit_queue_op(kind)

    def emit_value_op(self, kind):
        rng, ops, model, keys, counters = self.rng, self.ops, self.model, self.keys, self.counters
        present = self.present
        if kind == "set":
            k, v = rng.choice(keys), self.value()
            ops.append(["set", k, v])
            model[k] = v
        elif kind == "get" and present():
            ops.append(["get", rng.choice(present())])
        elif kind == "add":
            k = rng.choice(counters + keys)
            cur = _stoll(model.get(k, "0"))
            if cur is None:
                return  # torch closes the connection on a non-numeric ADD
            delta = rng.choice([1, -1, 0, 5, 10**12, -(10**12)])
            ops.append(["add", k, delta])
            model[k] = str(cur + delta)
        elif kind == "compare_set":
            k = rng.choice(keys)
            cur = model.get(k)
            expected = rng.choice(["", cur if cur is not None else "", "nope"])
            desired = self.value()
            ops.append(["compare_set", k, expected, desired])
            if (cur is None and expected == "") or (cur is not None and cur == expected):
                model[k] = desired
        elif kind == "check":
            cands = keys + counters + (self.queues if self.queues_ok else []) + [f"{self.p}absent"]
            ops.append(["check", rng.sample(cands, rng.randint(1, 3))])
        elif kind == "delete_key":
            k = rng.choice(keys + counters)
            ops.append(["delete_key", k])
            model.pop(k, None)
        elif kind == "append":
            k, v = rng.choice(keys), self.value()
            ops.append(["append", k, v])
            model[k] = model.get(k, "") + v
        elif kind == "multi_get" and present():
            ops.append(["multi_get", rng.sample(present(), min(len(present()), 4))])
        elif kind == "multi_set":
            ks = rng.sample(keys + counters, rng.randint(1, 4))
            vs = [self.value() for _ in ks]
            ops.append(["multi_set", ks, vs])
            model.update(zip(ks, vs))
        elif kind == "check_present":
            ops.append(["check", present()[:3] or [f"{self.p}absent"]])
        elif kind == "shared_add":
            ops.append(["add", "shared/counter", rng.randint(1, 9), "unordered"])

    def emit_wait_op(self, kind):
        rng, ops, present = self.rng, self.ops, self.present
        if kind == "wait" and present():
            ops.append(["wait", rng.sample(present(), min(len(present()), 3))])
        elif kind == "wait_timeout":
            missing = [self.fresh("never")] + rng.sample(present(), min(len(present()), 1))
            ops.append(["wait_timeout", missing, TIMEOUT_MS])
            self.alive()
        elif kind == "get_timeout":
            ops.append(["get_timeout", self.fresh("never"), TIMEOUT_MS])
            self.alive()
        elif kind == "barrier_timeout":
            k = self.fresh("bar")
            ops.append(["barrier_timeout", k, 2, TIMEOUT_MS])
            self.barriers[k] = 1
            self.alive()
        elif kind == "barrier_again" and self.barriers:
            k = rng.choice(sorted(self.barriers))
            self.barriers[k] += 1
            ops.append(["barrier", k, self.barriers[k]])  # released at once: count reaches ws
            ops.append(["get", k])

    def emit_queue_op(self, kind):
        rng, ops, qmodel = self.rng, self.ops, self.qmodel
        if kind == "queue_push":
            q, v = rng.choice(self.queues), self.value()
            ops.append(["queue_push", q, v])
            qmodel[q].append(v)
        elif kind == "queue_pop":
            q = rng.choice(self.queues)
            block = bool(qmodel[q]) and rng.random() < 0.5  # blocking only when non-empty
            ops.append(["queue_pop", q, block])
            if qmodel[q]:
                qmodel[q].pop(0)
        elif kind == "queue_pop_timeout":
            q = rng.choice(self.queues)
            if qmodel[q]:
                return
            ops.append(["queue_pop_timeout", q, TIMEOUT_MS])
            self.alive()
        elif kind == "queue_len":
            ops.append(["queue_len", rng.choice(self.queues)])
        elif kind == "queue_refused":
            ops.append(["queue_push", f"{self.p}q0", "x"])

    def ring(self, queue_clients):
        """Cross-client wake-ups: publish ours, wait for the next client's."""
        c, ops = self.c, self.ops
        ops.append(["set", f"ring/{c}", "here"])
        ops.append(["wait", [f"ring/{(c + 1) % NUM_CLIENTS}"]])
        if c in queue_clients:
            i = queue_clients.index(c)
            nxt = queue_clients[(i + 1) % len(queue_clients)]
            ops.append(["queue_push", f"ringq/{nxt}", f"from {c}"])
            ops.append(["queue_pop", f"ringq/{c}", True])

    def finish(self):
        """The 3-client barrier, client 0's counts while the others wait, and final reads."""
        ops = self.ops
        ops.append(["barrier", "sync/all", NUM_CLIENTS])
        if self.c == 0:
            ops.append(["num_keys"])
            ops.append(["list_keys"])
            ops.append(["add", "shared/counter", 0])
            ops.append(["set", "sync/counted", "1"])
        else:
            ops.append(["wait", ["sync/counted"]])
            ops.append(["get", "shared/counter"])
        for k in self.keys + self.counters:
            if k in self.model:
                ops.append(["get", k])
        if self.present():
            ops.append(["multi_get", self.present()])
        if self.queues_ok:
            for q in self.queues:
                ops.append(["queue_len", q])


def make_programs(seed):
    """Per-client op lists whose results do not depend on how the clients interleave.

    Keys, queues and barrier keys under c<i>/ are touched by client i only. Cross-client
    traffic: a set/wait ring, a queue ring (a blocking pop woken by the neighbour's push), a
    shared counter whose ADD replies are compared only as "an int", and a 3-client barrier
    after which client 0 reads num_keys/list_keys while the others are parked in a WAIT.
    """
    rng = random.Random(seed)
    queue_clients = [c for c, (_, q) in enumerate(CLIENT_OPTIONS) if q]
    programs = []
    for c, (_, queues_ok) in enumerate(CLIENT_OPTIONS):
        client = ClientProgram(rng, c, queues_ok)
        for step in range(OPS_PER_CLIENT):
            client.emit(rng.choice(client.kinds))
            if step == OPS_PER_CLIENT // 2:
                client.ring(queue_clients)
        client.finish()
        programs.append(client.ops)
    return programs
