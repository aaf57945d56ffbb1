# meson's entry to the pytest suite: exit 77 (skipped) where pytest is missing.
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed: skipped")
    sys.exit(77)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
