"""The wheel's native extension (crates/pyext): the `podline` command it gives `pip install`."""

from __future__ import annotations

import subprocess

from podline._binary import _wheel_binary


def test_the_wheels_podline_command_runs_the_native_cli() -> None:
    """`pip install` puts a `podline` script on PATH that runs the command in the extension:
    same version line, and clap's usage error (exit 2) for an unknown subcommand."""
    exe = _wheel_binary()
    assert exe is not None, "the wheel installed no podline command"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version
    assert version.stdout.startswith("podline "), version.stdout
    bad = subprocess.run([str(exe), "no-such-command"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2, bad
    assert "no-such-command" in bad.stderr
