# meson's entry to the pytest suite: exit 77 (skipped) where pytest is
# missing. GPUFEED_PY_WITHOUT=numpy,torch runs it as if those were not
# installed (their tests skip; the rest must pass without them).
import os
import sys

for name in filter(None, os.environ.get("GPUFEED_PY_WITHOUT", "").split(",")):
    sys.modules[name] = None  # import raises ImportError
try:
    import pytest
except ImportError:
    print("pytest is not installed: skipped")
    sys.exit(77)
# A test still running after 300 s prints every thread's stack: a hang says where.
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "-o", "faulthandler_timeout=300",
                     *sys.argv[1:]]))
