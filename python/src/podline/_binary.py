"""Where the ``podline`` binary is: ``PODLINE_BIN``, then the wheel's, then ``PATH``."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

#: Environment variable naming the binary to run (wins over everything else).
ENV_VAR = "PODLINE_BIN"

_EXE = "podline.exe" if sys.platform == "win32" else "podline"


class BinaryNotFound(RuntimeError):
    """No usable ``podline`` binary: the message says where it was looked for."""


def _wheel_binary() -> Path | None:
    """The binary the ``podline`` wheel installed into this environment's scripts directory."""
    candidates = [Path(sysconfig.get_path("scripts")) / _EXE]
    user = sysconfig.get_path("scripts", f"{os.name}_user")
    if user:
        candidates.append(Path(user) / _EXE)
    # A venv's python may be a symlink to the base interpreter: also look beside sys.executable.
    candidates.append(Path(sys.executable).parent / _EXE)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def find_binary() -> str:
    """The path of the ``podline`` binary to run.

    Order: ``$PODLINE_BIN`` (must exist and be executable), the binary installed by the
    ``podline`` wheel, then ``podline`` on ``PATH``.
    """
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinaryNotFound(
                f"{ENV_VAR}={explicit!r} is not an executable file; "
                "expected the path of a podline binary (e.g. target/debug/podline)"
            )
        return str(path)
    wheel = _wheel_binary()
    if wheel is not None:
        return str(wheel)
    on_path = shutil.which(_EXE)
    if on_path:
        return on_path
    raise BinaryNotFound(
        f"no podline binary: set {ENV_VAR}, install the podline wheel "
        "(pip install ./python from the repository), or put podline on PATH"
    )
