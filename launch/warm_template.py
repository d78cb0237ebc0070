# The warm template: a Python that has imported the job's modules once and makes ranks from
# itself (docs/design.md §4.5a). Compiled into muster (launch/CMakeLists.txt embeds this
# file) and run as `python -u -c LOADER SOURCE SOCKET_FD MODULE...`, LOADER compiling SOURCE
# as "<muster warm template>" (launch/warm_source.cc).
#
# LAUNCH_ENV (JSON, after SOCKET_FD) is the environment muster started the interpreter with:
# where PYTHON_EXEC is a wrapper that changes it (a venv's script that sets LD_LIBRARY_PATH),
# the template's os.environ differs from it, and an exec'd rank's would differ the same way.
#
# Protocol on SOCKET_FD (SOCK_SEQPACKET, one datagram each way per rank):
#   agent -> template: a JSON request {argv, env, cwd, new_session, cpus, agent_pid,
#                      cgroup_namespace} with
#                      three fds (SCM_RIGHTS): the rank's stdout, its stderr, and the rank's
#                      end of the go socket.
#   template -> agent: once, "ready" when the modules are imported; then per request
#                      "pid N" (the rank exists, is the agent's child and waits for the go
#                      byte) or "fallback WHY" (not safe to fork now: the agent execs it).
# The rank is made by a double fork: the template forks a middle process that forks the rank
# and exits, so that the rank is re-parented to the agent (a child subreaper) and the agent
# reaps it and sees its exact wait status. os.fork is glibc's fork: the at-fork handlers of
# torch and its libraries run, which a raw clone(CLONE_PARENT) from ctypes would skip.
import ctypes
import importlib
import importlib.machinery
import json
import os
import runpy
import socket
import sys
import threading
import time
import types

# What a module may read from the environment while it is imported: the rank's value must be
# the template's, or the rank is exec'd instead.
_IMPORT_TIME_NAMES = ("LD_PRELOAD", "LD_LIBRARY_PATH")
_IMPORT_TIME_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "PYTHON")
_PR_SET_PDEATHSIG = 1
_CLONE_NEWCGROUP = 0x02000000
__file_of_template__ = sys._getframe().f_code.co_filename  # "<muster warm template>"
_SIGKILL = 9


def _unsafe_to_fork():
    """Why forking now would be unsafe, or None."""
    if threading.active_count() != 1:
        return "the template runs %d Python threads" % threading.active_count()
    tasks = len(os.listdir("/proc/self/task"))
    if tasks != 1:
        return "the template runs %d threads (an OpenMP or intra-op pool?)" % tasks
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the template holds a CUDA context"
    return None


def _stack_hook_dir(env):
    """The directory of muster's stack hook (agent/diagnostics/stack_hook.h) at the head of
    the rank's PYTHONPATH, or None. The template imported without it; the rank runs it."""
    if "MUSTER_STACKS_DIR" not in env:
        return None
    head = env.get("PYTHONPATH", "").split(":")[0]
    try:
        with open(os.path.join(head, "sitecustomize.py")) as f:
            return head if f.readline().startswith("# Written by muster") else None
    except OSError:
        return None


_launch_env = {}  # what the interpreter was started with (LAUNCH_ENV)


def _as_interpreter_sees(request):
    """The rank's environment as its interpreter would see it once started through
    PYTHON_EXEC: the variables a wrapper changed for the template changed the same way
    (request["env"] rewritten in place). A wrapper's change from a different value cannot be
    known: the reason, or None."""
    entries = request["env"]
    env = dict(entry.partition("=")[::2] for entry in entries)
    wrapped = {k for k in set(_launch_env) | set(os.environ)
               if _launch_env.get(k) != os.environ.get(k)}
    for name in sorted(wrapped):
        if env.get(name) != _launch_env.get(name):
            return "the interpreter's wrapper sets %s, which differs for the rank" % name
    kept = [e for e in entries if e.partition("=")[0] not in wrapped]
    request["env"] = kept + ["%s=%s" % (k, os.environ[k]) for k in sorted(wrapped)
                             if k in os.environ]
    return None


def _import_time_difference(entries):
    """A variable read at import whose value the rank would not see, or None."""
    env = dict(entry.partition("=")[::2] for entry in entries)
    hook = _stack_hook_dir(env)
    if hook is not None:
        rest = env["PYTHONPATH"][len(hook) + 1 :]
        env = dict(env, PYTHONPATH=rest) if rest else {k: v for k, v in env.items() if k != "PYTHONPATH"}
    for name in sorted(set(env) | set(os.environ)):
        if name == "PYTHONUNBUFFERED":
            continue  # both run unbuffered (-u)
        if name in _IMPORT_TIME_NAMES or name.startswith(_IMPORT_TIME_PREFIXES):
            if env.get(name) != os.environ.get(name):
                return "%s differs from the template's (read at import)" % name
    return None


def _fork_rank():
    """The rank's pid in the template; 0 in the rank."""
    rd, wr = os.pipe()
    middle = os.fork()
    if middle == 0:
        rank = -1
        try:
            os.close(rd)
            rank = os.fork()
            if rank > 0:
                os.write(wr, b"%d" % rank)
        except BaseException:
            pass
        if rank != 0:
            os._exit(0)  # the middle process: its work is done
        os.close(wr)
        return 0
    os.close(wr)
    data = b""
    try:
        while True:
            chunk = os.read(rd, 32)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(rd)
        os.waitpid(middle, 0)
    if not data:
        raise OSError("the middle process died before it forked the rank")
    return int(data)


def _serve(sock):
    """Makes ranks until the agent closes the socket; in a rank returns its request."""
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 22, 3)
        if not msg:
            os._exit(0)  # the agent is done (or gone)
        request = json.loads(msg)
        why = (_unsafe_to_fork() or _as_interpreter_sees(request) or
               _import_time_difference(request["env"]))
        pid = None
        if why is None:
            try:
                pid = _fork_rank()
            except OSError as e:
                why = "fork: %s" % e
        if pid == 0:
            sock.close()
            return request, fds
        for fd in fds:
            os.close(fd)
        sock.send(b"pid %d" % pid if why is None else b"fallback " + why.encode())


def _become_rank(request, fds):
    """What the exec path's spawn child does before execve, in the same order."""
    out, err, go = fds
    # The agent has put this process in the attempt's cgroup (or told the watchdog) when the
    # byte comes; EOF: the agent is gone.
    if os.read(go, 1) != b"g":
        os._exit(128 + _SIGKILL)
    os.close(go)
    libc = ctypes.CDLL(None, use_errno=True)
    if request.get("cgroup_namespace") and libc.unshare(_CLONE_NEWCGROUP) != 0:
        # The exec path's clone3 makes one rooted at the rank's leaf, where the agent has put
        # this process by now. Failing that, the rank must not run: 126, as a failed spawn.
        os.write(err, b"muster warm start: unshare(CLONE_NEWCGROUP): %s\n"
                 % os.strerror(ctypes.get_errno()).encode())
        os._exit(126)
    if libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0) != 0:
        os._exit(126)
    if os.getppid() != request["agent_pid"]:
        os._exit(128 + _SIGKILL)  # the agent died before PDEATHSIG was armed
    if request["new_session"]:
        os.setsid()
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (out, err):
        if fd > 2:
            os.close(fd)
    if request["cpus"]:
        os.sched_setaffinity(0, request["cpus"])
    if request["cwd"]:
        os.chdir(request["cwd"])
    # The whole environment, as execve would give it (os.environ writes through to C's).
    os.environ.clear()
    for entry in request["env"]:
        name, _, value = entry.partition("=")
        os.environ[name] = value
    # What an import seeds from the OS's entropy, each exec'd rank has its own of: Python's
    # `random` reseeds itself after a fork, NumPy's global generator does not.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


_stacks_hook = None  # the hook's globals: its open stacks file must stay open


def _run_stack_hook():
    """What the hook's sitecustomize does at an exec'd rank's start, minus the chaining."""
    global _stacks_hook
    hook = _stack_hook_dir(os.environ)
    if hook is not None:
        sys.path.insert(1, hook)
        _stacks_hook = runpy.run_path(os.path.join(hook, "sitecustomize.py"), run_name="muster_stacks_hook")


def _run_main(request):
    """Runs the script or module as __main__, as `python -u [-m] ARGS` would."""
    argv = request["argv"]
    args = argv[2:]  # after the interpreter and -u
    sys.orig_argv = list(argv)
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    if args[0] == "-m":
        sys.argv = args[1:]
        sys.path[0] = os.getcwd()
        _run_stack_hook()
        runpy._run_module_as_main(args[1], alter_argv=True)
        return
    script = os.path.abspath(args[0])
    sys.argv = args
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    _run_stack_hook()
    main.__file__ = script
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__builtins__ = __builtins__
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    exec(code, main.__dict__)


def _start():
    """The socket to the agent, once the job's modules are imported."""
    global _launch_env
    sock = socket.socket(fileno=int(sys.argv[1]))
    _launch_env = dict(entry.partition("=")[::2] for entry in json.loads(sys.argv[2]))
    started = time.monotonic()
    for module in sys.argv[3:]:
        importlib.import_module(module)
    # On the agent's stderr, one line (a single write): how long the imports took.
    sys.stderr.write("[muster warm template pid %d] ready: imported %s in %.2f s\n" % (
        os.getpid(), ", ".join(sys.argv[3:]) or "nothing", time.monotonic() - started))
    sock.send(b"ready")
    return sock


def _run_rank(request):
    """_run_main, with an uncaught exception printed as the interpreter prints it for an
    exec'd rank: from the script's frame on (this file's frames are the template's)."""
    try:
        _run_main(request)
    except (SystemExit, KeyboardInterrupt):
        raise  # the interpreter's own handling: the code, or death by SIGINT
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file_of_template__:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        sys.exit(1)


_request, _fds = _serve(_start())
_become_rank(_request, _fds)
_run_rank(_request)
