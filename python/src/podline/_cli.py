"""The ``podline`` command of the wheel: the native extension's ``run_cli``.

The wheel ships podline as one native extension (``podline._native``) instead of a separate
executable; this script is what ``pip install podline`` puts on ``PATH`` as ``podline``.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Runs ``podline`` with this process's arguments and exits with its code.

    ``os._exit``: the command's own signal handling (SIGTERM / SIGINT delete the pod and exit
    130/143) must decide the exit code, not a KeyboardInterrupt Python would raise on return.
    """
    from podline import _native

    code = _native.run_cli(["podline", *sys.argv[1:]])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
