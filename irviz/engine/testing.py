"""Commands only a test engine has (protocol.TEST_COMMANDS, bound with IRVIZ_TEST_COMMANDS=1)."""
from __future__ import annotations

import os
import signal
import sys
import time


def crash() -> None:
    """Die as TVM does when it segfaults, so the bridge's restart and replay can be tested."""
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)  # the signal is delivered asynchronously
