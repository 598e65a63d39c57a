# SPDX-License-Identifier: MIT OR Apache-2.0
"""What the packaging checks (check_pip_install.py, check_wheels.py: ctest
capi_python_pip, capi_python_wheel*, capi_python_sdist, ...) share: log lines
stamped with the time since the check began, the TW-SKIP and FAIL exits, and
running a command with its output shown. Not a test module (no test_ prefix)."""

import subprocess
import sys
import time

START = time.monotonic()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - START, msg), flush=True)


def skip(msg):
    """Ends the check as skipped (ctest's SKIP_REGULAR_EXPRESSION)."""
    print("TW-SKIP: %s" % msg, flush=True)
    sys.exit(0)


def fail(msg):
    print("FAIL: %s" % msg, flush=True)
    sys.exit(1)


def run(cmd, check=True, shown=None, **kw):
    """Runs cmd (stdout and stderr together, printed); with check, fails the check
    on a non-zero exit. shown: the command as logged (default: cmd). Returns
    (exit status, output)."""
    log("$ " + " ".join(shown or cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    out = p.stdout.decode(errors="replace")
    if out.strip():
        print(out.rstrip(), flush=True)
    if check and p.returncode != 0:
        fail("exit %d: %s" % (p.returncode, " ".join(cmd)))
    return p.returncode, out
