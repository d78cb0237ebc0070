"""c10d_store_server as a separate process under load and abuse (no torch needed).

    MUSTER_BUILD_DIR=build /usr/bin/python3 -m pytest tests/integration/test_store_robustness.py
"""
import os
import random
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import store_helpers  # noqa: E402
from conftest import sanitizer_of_build  # noqa: E402

pytestmark = pytest.mark.skipif(
    not store_helpers.server_binary().exists(),
    reason=f"{store_helpers.server_binary()} is not built (set MUSTER_BUILD_DIR)")

# Legacy numbering (torch 1.13; APPEND and MULTI_GET from 2.1).
SET, GET, ADD, GETNUMKEYS, APPEND, MULTI_GET = 0, 2, 3, 6, 9, 10


def s(b):
    return struct.pack("<Q", len(b)) + b


def recv_exact(sock, n, timeout=10):
    sock.settimeout(timeout)
    out = bytearray(n)
    view = memoryview(out)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("store closed the connection")
        got += k
    return bytes(out)


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def add(sock, key, delta):
    sock.sendall(bytes([ADD]) + s(key) + struct.pack("<q", delta))
    return struct.unpack("<q", recv_exact(sock, 8))[0]


@pytest.fixture
def server():
    srv = store_helpers.start_muster_server()
    yield srv
    rc = srv.stop()
    assert rc == 0, f"server exit code {rc}: {srv.stderr[-2000:]}"


def median_add_latency(sock, n=400):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        add(sock, b"/latency", 1)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[n // 2]


_SLOWLORIS = """
import socket, struct, sys, time
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
value = b"x" * 64
request = bytes([0]) + struct.pack("<Q", 5) + b"/slow" + struct.pack("<Q", len(value)) + value
print("connected", flush=True)
for byte in request:
    sock.sendall(bytes([byte]))
    time.sleep(0.01)
"""


@pytest.mark.serial
def test_ten_thousand_idle_connections_and_slowloris_keep_latency(server):
    """Issue 3 acceptance 4: with 10 000 idle connections open and a slowloris client
    sending one byte at a time, another client's median round trip stays within 2x of its
    latency on an idle server. The slowloris is its own process (a thread would share the
    probe's GIL and measure Python's thread switches); idle and loaded medians are taken
    as the best of three batches each."""
    want = 10000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < want + 200:
        pytest.skip(f"SKIPPED LOUDLY: RLIMIT_NOFILE hard limit {hard} < {want + 200}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Server threads and this probe share one CPU, so that every round trip takes the same
    # path (a same-core hand-off; across cores the same add costs 2-3x more, and which one a
    # batch gets is the scheduler's choice, not the server's).
    mine = os.sched_getaffinity(0)
    cpu = {min(mine)}
    os.sched_setaffinity(0, cpu)
    for tid in os.listdir(f"/proc/{server.proc.pid}/task"):
        os.sched_setaffinity(int(tid), cpu)
    probe = connect(server.port)
    median_add_latency(probe, 100)  # warm up
    idle = [median_add_latency(probe, 200) for _ in range(3)]
    socks = []
    dribbler = None
    try:
        start = time.monotonic()
        for _ in range(want):
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        connect_s = time.monotonic() - start
        dribbler = subprocess.Popen([sys.executable, "-c", _SLOWLORIS, str(server.port)],
                                    stdout=subprocess.PIPE, text=True)
        assert dribbler.stdout.readline().strip() == "connected"
        loaded = [median_add_latency(probe, 200) for _ in range(3)]
        assert dribbler.poll() is None, "the slowloris finished before the measurement did"
        # A few idle ones wake up and still work.
        for sock in random.Random(7).sample(socks, 20):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            add(sock, b"/probe", 1)
        assert add(probe, b"/probe", 0) == 20
        normal, worst = min(idle), min(loaded)
        print(f"{want} connections in {connect_s:.2f} s; median add (best of 3 batches) "
              f"{normal * 1e6:.0f} us idle, {worst * 1e6:.0f} us loaded")
        # 2x, plus 30 us for the Python client's own jitter on a 2-core machine.
        assert worst <= 2 * normal + 30e-6, (idle, loaded)
    finally:
        os.sched_setaffinity(0, mine)
        if dribbler is not None:
            dribbler.kill()
            dribbler.wait(10)
        for sock in socks:
            sock.close()
    assert server.alive()


def test_garbage_and_huge_lengths_close_only_their_connection(server):
    good = connect(server.port)
    assert add(good, b"/n", 1) == 1
    rng = random.Random(1234)
    for i in range(200):
        bad = connect(server.port)
        if i % 4 == 0:
            payload = bytes([GET]) + struct.pack("<Q", 1 << 60)
        elif i % 4 == 1:
            payload = bytes([SET]) + s(b"/k") + struct.pack("<Q", 1 << 60)
        else:
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 512)))
        try:
            bad.sendall(payload)
        except OSError:
            pass  # already closed by the server: fine
        bad.close()
    assert add(good, b"/n", 1) == 2
    assert server.alive()


def test_byte_by_byte_and_half_requests(server):
    sock = connect(server.port)
    req = bytes([SET]) + s(b"/slow") + s(b"value") + bytes([GET]) + s(b"/slow")
    for b in req:
        sock.send(bytes([b]))
        time.sleep(0.001)
    assert recv_exact(sock, 8 + 5) == s(b"value")
    half = connect(server.port)
    half.sendall(req[:7])
    half.close()
    sock.sendall(bytes([GETNUMKEYS]))
    assert struct.unpack("<q", recv_exact(sock, 8))[0] == 1


def closed_by_peer(sock, timeout=30):
    """True once the server closed `sock` (EOF or reset), reading and dropping any bytes."""
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        return False
    return True


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


FOUR_GIB = 4 << 30


def test_multi_get_amplification_under_a_4gib_address_space():
    """Issue 18 finding 4: an 18 KB MULTI_GET naming an 8 MiB key 2000 times asks for a
    16 GB reply. Under a Pod-like 4 GiB address-space limit the store threw bad_alloc
    (exit 134). Now the reply is refused from its size before it is built: only that
    client's connection closes, with a log line naming it and the size, and another client
    still gets the 8 MiB value."""
    if shutil.which("prlimit") is None:
        pytest.skip("SKIPPED LOUDLY: prlimit (util-linux) is not installed")
    if sanitizer_of_build():
        # ASan and TSan reserve terabytes of address space for their shadow memory at start:
        # under --as they abort before main. The plain build (scripts/test.sh's) runs it.
        pytest.skip(f"SKIPPED LOUDLY: a {sanitizer_of_build()} sanitizer build cannot start "
                    "under a 4 GiB address-space limit; the plain build runs this test")
    binary = store_helpers.server_binary()
    srv = store_helpers.Server(["prlimit", f"--as={FOUR_GIB}", str(binary), "0"])
    try:
        big = b"v" * (8 << 20)
        writer = connect(srv.port)
        writer.sendall(bytes([SET]) + s(b"k") + s(big))
        writer.sendall(bytes([GETNUMKEYS]))
        assert struct.unpack("<q", recv_exact(writer, 8))[0] == 1
        greedy = connect(srv.port)
        request = bytes([MULTI_GET]) + struct.pack("<Q", 2000) + s(b"k") * 2000
        assert len(request) == 18_009  # 18 KB asking for 16 GB
        start = time.monotonic()
        greedy.sendall(request)
        assert closed_by_peer(greedy), "the greedy client's connection stayed open"
        refused_s = time.monotonic() - start
        assert srv.alive(), f"store died: {srv.proc.poll()}"
        other = connect(srv.port)
        t = time.monotonic()
        other.sendall(bytes([GET]) + s(b"k"))
        assert recv_exact(other, 8 + len(big), timeout=30) == s(big)
        get_s = time.monotonic() - t
        assert add(writer, b"/n", 1) == 1
        print(f"16 GB MULTI_GET refused in {refused_s * 1e3:.1f} ms; "
              f"another client's 8 MiB GET then took {get_s * 1e3:.1f} ms")
    finally:
        rc = srv.stop()
    assert rc == 0, f"server exit code {rc}: {srv.stderr[-2000:]}"
    reply_bytes = 2000 * (8 + len(big))
    assert f"refused a reply of {reply_bytes} bytes" in srv.stderr, srv.stderr[-2000:]


_APPENDER = """
import socket, struct, sys, time
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
chunk = bytes([9]) + struct.pack("<Q", 4) + b"/log" + struct.pack("<Q", 1024) + b"x" * 1024


def appends(n):  # then GETNUMKEYS, answered once every APPEND before it is applied
    sock.sendall(chunk * n + bytes([6]))
    got = b""
    while len(got) < 8:
        got += sock.recv(8 - len(got))


print("connected", flush=True)
sys.stdin.readline()
start = time.perf_counter()
appends(300)
print(f"{time.perf_counter() - start:.6f}", flush=True)
done = 300
# Keep appending for the rest of the window, about 10 MiB a second: the value grows by
# tens of MiB, not by what the machine could push.
while time.perf_counter() - start < float(sys.argv[2]) and done < 30000:
    appends(50)
    done += 50
    time.sleep(0.005)
print(done, flush=True)
"""

APPEND_WINDOW_S = 2.0


@pytest.mark.serial
def test_appends_to_a_large_value_leave_other_clients_p99_alone(server):
    """Issue 18 finding 4: 300 appends of 1 KiB onto a 32 MiB value took 4 s (each copied
    the whole value) and stalled other clients' GETs for 1.6 s. A separate process appends
    300 KiB, then keeps appending for the rest of a 2 s window, while this one times
    another client's GETs; the numbers are printed."""
    writer = connect(server.port)
    writer.sendall(bytes([SET]) + s(b"/log") + s(b"a" * (32 << 20)))
    writer.sendall(bytes([SET]) + s(b"/small") + s(b"s"))
    writer.sendall(bytes([GETNUMKEYS]))
    assert struct.unpack("<q", recv_exact(writer, 8, timeout=30))[0] == 2
    probe = connect(server.port)
    appender = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(server.port), str(APPEND_WINDOW_S)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert appender.stdout.readline().strip() == "connected"
        get = bytes([GET]) + s(b"/small")
        latencies = []
        appender.stdin.write("go\n")
        appender.stdin.flush()
        while appender.poll() is None:
            t = time.perf_counter()
            probe.sendall(get)
            assert recv_exact(probe, 9, timeout=60) == s(b"s")
            latencies.append(time.perf_counter() - t)
        first_300_s = float(appender.stdout.readline())
        appended = int(appender.stdout.readline())
    finally:
        appender.kill()
        appender.wait(10)
    latencies.sort()
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    print(f"300 appends of 1 KiB onto 32 MiB: {first_300_s * 1e3:.1f} ms; {appended} appends "
          f"in all; another client's GET meanwhile ({len(latencies)} requests): "
          f"p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms, max {latencies[-1] * 1e3:.2f} ms")
    writer.sendall(bytes([GET]) + s(b"/log"))
    size = (32 << 20) + appended * 1024
    value = recv_exact(writer, 8 + size, timeout=60)
    assert value[:8] == struct.pack("<Q", size)
    assert value[(32 << 20) + 7:(32 << 20) + 9] == b"ax" and value.endswith(b"x" * 1024)
    # Generous for a loaded 2-core machine: in place the first 300 appends take
    # milliseconds and a GET well under one; copying took seconds and stalled GETs for
    # hundreds of ms at a time.
    assert first_300_s < 1.0
    assert len(latencies) >= 20
    assert p99 < 0.1
