"""Lets pytest import `eddy_guest` from this directory without installing it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
