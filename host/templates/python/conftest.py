"""Makes eddy's Python SDK importable for pytest when it is not installed."""

import sys

try:
    import eddy_guest  # noqa: F401
except ImportError:
    sys.path.insert(0, "{{python_sdk}}")
