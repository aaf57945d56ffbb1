# meson's entry to the pytest suite: exit 77 (skipped) where pytest is
# missing. GPUFEED_PY_WITHOUT=numpy,torch runs it as if those were not
# installed (their tests skip; the rest must pass without them).
import faulthandler
import os
import signal
import sys

for name in filter(None, os.environ.get("GPUFEED_PY_WITHOUT", "").split(",")):
    sys.modules[name] = None  # import raises ImportError
try:
    import pytest
except ImportError:
    print("pytest is not installed: skipped")
    sys.exit(77)
# meson's SIGTERM at the timeout prints every thread's stack: a hang says
# where. (Not pytest's faulthandler_timeout: its watchdog thread, started
# and ended for every test, runs beside the forks torch's workers make.)
# To a copy of the real stderr: pytest puts its capture file on fd 2.
stderr_copy = os.fdopen(os.dup(2), "w")
faulthandler.register(signal.SIGTERM, file=stderr_copy, all_threads=True, chain=True)
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]]))
