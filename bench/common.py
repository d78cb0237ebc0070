"""Shared plumbing for muster's benchmarks (reference/perf.md §7).

Paths: MUSTER_BUILD_DIR (default <repo>/build) for bin/muster and tests/fake_worker;
TORCH_PYTHON (default /usr/bin/python3, torch 1.13) runs tests/tools/torchrun113.py;
TORCH2_PYTHON, when set, is a Python with torch 2.x whose `-m torch.distributed.run` is
benchmarked too (left out when unset or not importable).
"""
import atexit
import json
import os
import pathlib
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
BUILD = pathlib.Path(os.environ.get("MUSTER_BUILD_DIR", REPO / "build"))
MUSTER_BUILT = str(BUILD / "bin" / "muster")
FAKE_BUILT = str(BUILD / "tests" / "fake_worker")
MUSTER = MUSTER_BUILT  # replaced by a private copy in check_binaries()
FAKE = FAKE_BUILT
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
TORCHRUN113 = str(REPO / "tests" / "tools" / "torchrun113.py")
TORCH2_PYTHON = os.environ.get("TORCH2_PYTHON")
STARTED = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())  # the scoreboard's date

_HELPERS = None


def helpers():
    """Compiles bench/helpers/*.c into a temp dir once; returns {name: path}."""
    global _HELPERS
    if _HELPERS is None:
        out = pathlib.Path(tempfile.mkdtemp(prefix="muster-bench-bin-"))
        atexit.register(shutil.rmtree, out, True)
        _HELPERS = {}
        for src in sorted((BENCH / "helpers").glob("*.c")):
            name = src.stem
            if name.endswith("_preload"):
                dst = out / f"{name}.so"
                cmd = ["cc", "-O2", "-shared", "-fPIC", "-o", str(dst), str(src)]
            else:
                dst = out / name
                cmd = ["cc", "-O2", "-o", str(dst), str(src)]
            subprocess.run(cmd, check=True)
            _HELPERS[name] = str(dst)
    return _HELPERS


def check_binaries():
    """Copies muster and fake_worker to a private dir, so that a rebuild of build/ by someone
    else during the benchmark neither breaks it nor changes the binary under test."""
    global MUSTER, FAKE
    import hashlib
    out = pathlib.Path(tempfile.mkdtemp(prefix="muster-bench-agent-"))
    atexit.register(shutil.rmtree, out, True)
    for _ in range(60):  # a concurrent build may be relinking right now
        if all(os.path.exists(p) and time.time() - os.path.getmtime(p) > 5
               for p in (MUSTER_BUILT, FAKE_BUILT)):
            break
        time.sleep(2)
    for p in (MUSTER_BUILT, FAKE_BUILT):
        if not os.path.exists(p):
            sys.exit(f"{p} missing: build first (cmake --build build)")
    MUSTER = str(out / "muster")
    FAKE = str(out / "fake_worker")
    shutil.copy2(MUSTER_BUILT, MUSTER)
    shutil.copy2(FAKE_BUILT, FAKE)
    with open(MUSTER, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    print(f"# muster under test: copy of {MUSTER_BUILT} (built "
          f"{time.ctime(os.path.getmtime(MUSTER_BUILT))}, sha256 {digest}...)")


# ---------------------------------------------------------------- agents under test


class Agent:
    """One agent configuration: builds its argv for N workers running CMD."""

    def __init__(self, name, kind, mi=None, python=None, env=None, args=()):
        self.name, self.kind, self.mi, self.python = name, kind, mi, python
        self.env = env or {}
        self.args = list(args)  # muster flags every run of this configuration gets

    def environ(self, extra=None):
        """The environment to run this agent with (None = inherit unchanged)."""
        if not self.env and not extra:
            return None
        e = dict(os.environ)
        e.update(self.env)
        e.update(extra or {})
        return e

    def argv(self, n, cmd, max_restarts=0, extra=()):
        if self.kind == "muster":
            return [MUSTER, "run", "--nproc-per-node", str(n), "--max-restarts",
                    str(max_restarts), *self.args, *extra, "--no-python", *cmd]
        if self.kind == "torchrun113":
            return [self.python, TORCHRUN113, "--standalone", "--nproc_per_node", str(n),
                    "--max_restarts", str(max_restarts), "--monitor_interval", str(self.mi),
                    *extra, "--no_python", *cmd]
        # torch 2.x: dash spellings
        return [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                str(n), "--max-restarts", str(max_restarts), "--monitor-interval", str(self.mi),
                *extra, "--no-python", *cmd]

    @property
    def is_torchrun(self):
        return self.kind != "muster"


def _importable(python, what):
    try:
        r = subprocess.run([python, "-c", f"import {what}; print({what}.__version__)"],
                           capture_output=True, text=True, timeout=120)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def agents(tmpfs_variant=False):
    """muster, torchrun 1.13 at mi=0.1 and at its default mi=5, torchrun 2.x if present.

    tmpfs_variant adds "muster TMPDIR=/dev/shm": the same agent with its temporary per-rank
    log directories on tmpfs instead of /tmp (ext4 here), to show what the directory
    create/remove syscalls cost."""
    out = [Agent("muster", "muster")]
    if tmpfs_variant and os.path.isdir("/dev/shm"):
        out.append(Agent("muster TMPDIR=/dev/shm", "muster", env={"TMPDIR": "/dev/shm"}))
    if os.environ.get("BENCH_CONTAINMENT_VARIANT"):
        # The default (auto: a cgroup per attempt where one can be made) next to the session
        # mode without cgroups, to show what the cgroup costs (issue 18).
        out.append(Agent("muster containment=session", "muster",
                         env={"MUSTER_CONTAINMENT": "session"}))
    if os.environ.get("BENCH_METRICS_VARIANT"):
        # The same agent serving Prometheus metrics (any free port, never scraped), to show
        # what --metrics-port costs an idle agent (issue 15 item 4). A flag, not the
        # environment: b6 runs every agent with the bench's own environment.
        out.append(Agent("muster --metrics-port", "muster", args=["--metrics-port", "0"]))
    v = _importable(TORCH_PYTHON, "torch")
    if v:
        out.append(Agent(f"torchrun {v} mi=0.1", "torchrun113", 0.1, TORCH_PYTHON))
        out.append(Agent(f"torchrun {v} mi=5", "torchrun113", 5, TORCH_PYTHON))
    else:
        print(f"# NOTE: no torch importable by {TORCH_PYTHON}: torchrun 1.13 left out")
    if TORCH2_PYTHON:
        v2 = _importable(TORCH2_PYTHON, "torch")
        if v2:
            out.append(Agent(f"torchrun {v2} mi=0.1", "torchrun2", 0.1, TORCH2_PYTHON))
        else:
            print(f"# NOTE: TORCH2_PYTHON={TORCH2_PYTHON} has no torch: torchrun 2.x left out")
    else:
        print("# NOTE: TORCH2_PYTHON unset (no PyPI torch 2.x venv here): torchrun 2.x left out")
    return out


def pinned_prefix(pinned):
    return ["taskset", "-c", "0"] if pinned else []


# ---------------------------------------------------------------- running


def run_timed(argv, pinned=False, env=None, cwd=None, timeout=600, on_started=None):
    """Runs argv under texec; returns (t0_ns, returncode, stderr_text, popen).

    t0 is CLOCK_MONOTONIC just before execve(agent). on_started(popen), if given, is called
    right after the process starts (e.g. to wait for stamps and signal it)."""
    r, w = os.pipe()
    full = pinned_prefix(pinned) + [helpers()["texec"], str(w)] + list(argv)
    p = subprocess.Popen(full, pass_fds=(w,), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE if on_started is None else subprocess.DEVNULL,
                         env=env, cwd=cwd, start_new_session=True)
    os.close(w)
    try:
        if on_started is not None:
            on_started(p)
        _, err = p.communicate(timeout=timeout)
    except BaseException:
        kill_group(p)
        raise
    with os.fdopen(r) as f:
        t0 = int(f.read().strip() or 0)
    return t0, p.returncode, (err or b"").decode(errors="replace"), p


def kill_group(p, sig=signal.SIGKILL):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def read_stamps(path):
    """fake_worker stamp lines: (local_rank, restart_count, pid, ns)."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    out.append((int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    except FileNotFoundError:
        pass
    return out


def wait_lines(path, n, timeout):
    """Polls until FILE has at least n lines; returns True if it did in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if sum(1 for _ in f) >= n:
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    return False


# ---------------------------------------------------------------- statistics / output


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, int(round(q / 100.0 * (len(xs) - 1)))))
    return xs[i]


def summary(xs):
    return {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99), "max": max(xs) if xs else
            float("nan"), "min": min(xs) if xs else float("nan")}


def fmt(v, unit="ms"):
    if v != v:  # nan
        return "-"
    if unit == "ms":
        if v >= 100:
            return f"{v:.0f}"
        if v >= 10:
            return f"{v:.1f}"
        return f"{v:.3f}"
    return f"{v:.3g}"


def table(title, header, rows, note=None):
    """Prints a GitHub-markdown table."""
    print(f"\n### {title}\n")
    if note:
        print(note + "\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    sys.stdout.flush()


def ratio(a, b):
    if not a or not b or a != a or b != b:
        return "-"
    r = a / b
    return f"{r:.0f}x" if r >= 10 else f"{r:.2f}x"


def machine_info():
    def sh(c):
        try:
            return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cpu": cpu,
        "somaxconn": sh("cat /proc/sys/net/core/somaxconn"),
        "ulimit -n": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        "muster": sh(f"cd {REPO} && git log -1 --format=%h") + " (HEAD; working tree may differ)",
    }


def print_header(name):
    print(f"## {name}\n")
    for k, v in machine_info().items():
        print(f"- {k}: {v}")
    print(f"- command: /usr/bin/python3 {' '.join(sys.argv)}")
    sys.stdout.flush()


def tmpdir():
    return tempfile.mkdtemp(prefix="muster-bench-")


def rmtree(d):
    shutil.rmtree(d, ignore_errors=True)


def _cpu_busy(interval=0.5):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t1, i1 = snap()
    time.sleep(interval)
    t2, i2 = snap()
    return 1.0 - (i2 - i1) / max(1, t2 - t1)


def wait_quiet(max_wait=180, threshold=0.15):
    """Waits until the machine is mostly idle (other people's builds share these 2 cores).

    Returns the busy fraction seen last; prints a warning if it never got quiet."""
    deadline = time.monotonic() + max_wait
    busy = _cpu_busy()
    while busy > threshold and time.monotonic() < deadline:
        time.sleep(2)
        busy = _cpu_busy()
    if busy > threshold:
        print(f"# WARNING: machine still {busy:.0%} busy after waiting {max_wait}s; "
              "numbers below are disturbed")
    return busy


_BUILD_TOOLS = {"cc1plus", "cc1", "ld", "ld.gold", "ld.lld", "collect2", "ninja", "make", "cmake",
                "clang", "clang++", "lto1", "as"}


def foreign_build_running():
    """True if a compiler/linker/build tool runs on this box (someone else's build)."""
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                if f.read().strip() in _BUILD_TOOLS:
                    return True
        except OSError:
            pass
    return False


def quiet_measure(fn, label=""):
    """Runs fn() after waiting for a quiet machine; if a foreign build was running at the start
    or the end, waits and runs it again (once). Returns (result, disturbed_flag)."""
    for attempt in range(2):
        wait_quiet()
        before = foreign_build_running()
        r = fn()
        after = foreign_build_running()
        if not (before or after):
            return r, False
        print(f"# NOTE: a foreign build ran during {label or 'a measurement'}"
              f"{'; retrying' if attempt == 0 else '; keeping it, marked *'}")
        time.sleep(20)
    return r, True


# ---------------------------------------------------------------- scoreboard (bench/scoreboard.py)


def add_summary_arg(ap):
    ap.add_argument("--summary-json", metavar="FILE",
                    help="also write this run's scoreboard rows to FILE (bench/scoreboard.py "
                         "merges them into RESULTS.md; bench/run_all.sh passes it)")


def board_row(benchmark, target, figure, vs_torch, verdict):
    """One scoreboard row. `benchmark` is its key: a later run's row of the same name
    replaces it, so it names the configuration (B number, what, size), not the values."""
    return {"benchmark": benchmark, "target": target, "figure": figure, "vs_torch": vs_torch,
            "verdict": verdict}


def verdict(ok):
    return "MET" if ok else "MISSED"


def command_line():
    """This run as a command from bench/, with the environment that chose the binaries."""
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in ("MUSTER_BUILD_DIR", "TORCH_PYTHON",
                                                         "TORCH2_PYTHON") if k in os.environ]
    args, skip = [], False
    for x in sys.argv[1:]:
        if skip:
            skip = False
        elif x == "--summary-json":
            skip = True
        elif not x.startswith("--summary-json="):
            args.append(x)
    return " ".join(env + [sys.executable, os.path.basename(sys.argv[0])] +
                    [shlex.quote(x) for x in args])


def commit():
    def git(*argv):
        return subprocess.run(["git", "-C", str(REPO), *argv], capture_output=True,
                              text=True).stdout.strip()
    sha = git("rev-parse", "--short", "HEAD") or "?"
    return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def write_summary(path, rows):
    """Writes the rows (board_row) with this run's commit, start date and command."""
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"command": command_line(), "commit": commit(), "date": STARTED,
                   "rows": rows}, f, indent=1)
        f.write("\n")
