"""Issue 28 items 2 and 3: muster installs as the ecosystem installs. `cmake --install`
puts the binaries, and only them, under a prefix (with a torchrun link when asked); the
wheel (`pip install .`: scikit-build-core, then auditwheel, packaging/wheel_backend.py)
carries the shared libraries its binaries need, so a fresh venv runs a torch job from it
with Debian's copies of those libraries hidden from the loader.

The wheel here packages the binaries of the build under test (packaging/prebuilt: the same
install rules, pyproject settings and auditwheel repair as `pip install .`, without
compiling again, which would cost minutes on CI's 2 cores)."""
import json
import os
import re
import subprocess

import pytest

from conftest import BUILD, MUSTER, REPO, TORCH_PYTHON, muster_env, needs_torch, \
    sanitizer_of_build

WHEEL_CHECK = REPO / "tests" / "integration" / "scripts" / "wheel_check.py"
PREBUILT = "packaging/prebuilt"
# What a manylinux wheel may take from the system (auditwheel's policy): glibc's libraries,
# the C++ runtime and zlib. Everything else muster loads must come from the wheel.
SYSTEM_LIB = re.compile(r"^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libresolv|"
                        r"libnss_\w+|libstdc\+\+|libgcc_s|libz)\.so")


def _sh_job(muster, env):
    return subprocess.run([str(muster), "run", "--standalone", "--nproc-per-node", "2",
                           "--no-python", "/bin/sh", "-c", "echo rank $RANK of $WORLD_SIZE"],
                          capture_output=True, text=True, timeout=60, env=env)


def test_cmake_install_puts_the_binaries_under_a_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if not p.is_dir())
    assert files == ["bin/muster", "bin/muster-probe"], files
    version = subprocess.run([str(prefix / "bin" / "muster"), "--version"],
                             capture_output=True, text=True, timeout=30)
    assert version.stdout.startswith("muster "), version.stdout + version.stderr
    job = _sh_job(prefix / "bin" / "muster", muster_env())
    assert job.returncode == 0, job.stderr[-2000:]
    assert "rank 0 of 2" in job.stdout and "rank 1 of 2" in job.stdout, job.stdout
    # MUSTER_INSTALL_TORCHRUN=ON adds bin/torchrun, a link to muster (the same install
    # rules, cmake/MusterInstall.cmake, over the build's binaries: packaging/prebuilt).
    alias_build, alias_prefix = tmp_path / "alias-build", tmp_path / "alias-prefix"
    for cmd in (["cmake", "-S", str(REPO / PREBUILT), "-B", str(alias_build),
                 f"-DMUSTER_PREBUILT_DIR={BUILD / 'bin'}", "-DMUSTER_INSTALL_TORCHRUN=ON"],
                ["cmake", "--build", str(alias_build)],
                ["cmake", "--install", str(alias_build), "--prefix", str(alias_prefix)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    assert os.readlink(alias_prefix / "bin" / "torchrun") == "muster"


def _resolved_libraries(path):
    """{soname: real path} of what the loader resolves for `path` on this machine."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    return {m[1]: os.path.realpath(m[2]) for m in re.finditer(r"^\s*(\S+) => (/\S+)", out, re.M)}


def _torch_extension():
    return subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch._C.__file__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


@needs_torch
@pytest.mark.skipif(bool(sanitizer_of_build()), reason=(
    "SKIPPED LOUDLY: this build is instrumented (MUSTER_SANITIZE); a wheel packages the "
    "plain build's binaries"))
def test_wheel_runs_a_torch_job_in_a_fresh_venv_without_the_debian_libraries(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: hiding Debian's libraries needs root (unshare --mount)")
    tools = subprocess.run([str(REPO / "scripts" / "wheel_tools_venv.sh")],
                           capture_output=True, text=True, timeout=600)
    assert tools.returncode == 0, tools.stderr
    dist = tmp_path / "dist"
    r = subprocess.run([tools.stdout.strip(), "-m", "pip", "wheel", "--no-build-isolation",
                        "--no-deps", "--no-index", "-w", str(dist),
                        f"--config-settings=cmake.source-dir={PREBUILT}",
                        f"--config-settings=cmake.define.MUSTER_PREBUILT_DIR={BUILD / 'bin'}",
                        "--config-settings=cmake.define.MUSTER_INSTALL_TORCHRUN=ON",
                        f"--config-settings=build-dir={tmp_path / 'wheel-build'}", "."],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    # auditwheel's tag: the oldest glibc the binaries run on.
    assert re.fullmatch(r"muster-[\d.]+-py3-none-manylinux_2_\d+_x86_64\.whl", wheel.name), wheel

    # A user's training venv: the system's torch, muster from pip (the tools' pip, pointed at
    # the venv: its own would cost a pip install into the venv first).
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True, timeout=120)
    r = subprocess.run([tools.stdout.strip(), "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "install", "--no-deps", "--no-index", str(wheel)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("muster", "muster-probe", "torchrun"):
        assert (venv / "bin" / name).exists(), name

    # Debian's copies of every library the wheel carries, hidden by /dev/null mounted over
    # them, except those torch itself loads (protobuf, fmt, OpenSSL): the workers need those,
    # and the agent's mappings below show it takes the wheel's.
    torch_libs = set(_resolved_libraries(_torch_extension()).values())
    hidden = sorted({path for soname, path in _resolved_libraries(MUSTER).items()
                     if not SYSTEM_LIB.match(soname) and path not in torch_libs})
    assert any("libgrpc" in path for path in hidden), hidden
    out = tmp_path / "out.jsonl"
    env = muster_env(OUT=out)
    env.pop("PYTHON_EXEC")  # the venv's python3, first on PATH, runs the workers
    env.pop("LD_LIBRARY_PATH", None)
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    script = "\n".join([
        "set -e",
        *(f"mount --bind /dev/null '{path}'" for path in hidden),
        # The hiding works: the build's own binary, which needs them, cannot start.
        f"if '{MUSTER}' --version >/dev/null 2>&1; then echo 'libraries not hidden' >&2;"
        " exit 99; fi",
        f"exec torchrun --standalone --nproc_per_node=2 '{WHEEL_CHECK}'",
    ])
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["rank"] for row in rows) == [0, 1], rows
    assert all(row["sum"] == 2.0 for row in rows), rows
    site = venv / "lib" / "python3.11" / "site-packages"
    for row in rows:
        assert row["agent_exe"] == str(site / "muster.scripts" / "torchrun"), row
        from_wheel = [lib for lib in row["agent_libs"] if lib.startswith(f"{site}/muster.libs/")]
        assert any("libgrpc" in lib for lib in from_wheel), row["agent_libs"]
        others = [lib for lib in row["agent_libs"] if lib not in from_wheel]
        assert all(SYSTEM_LIB.match(os.path.basename(lib)) for lib in others), others
