"""A dependency-free PEP 517 build backend for eddy-guest.

It builds the wheel (and an editable wheel) with the standard library only, so that
`pip install ./sdks/python` works offline, with or without build isolation, in a venv
that has no `wheel` package (setuptools < 70 cannot build wheels without it).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "eddy_guest"
DATA_SUFFIXES = (".py", ".wit", ".toml", ".typed")


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name() -> str:
    return _project()["name"].replace("-", "_")


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    readme = ROOT / project.get("readme", "README.md")
    body = readme.read_text(encoding="utf-8") if readme.exists() else ""
    return "\n".join(lines) + "\nDescription-Content-Type: text/markdown\n\n" + body


def _package_files() -> list[Path]:
    files = []
    for path in sorted((ROOT / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.name.endswith(DATA_SUFFIXES):
            files.append(path)
    return files


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest},{len(data)}"


def _write_wheel(directory: str, entries: list[tuple[str, bytes]]) -> str:
    version = _project()["version"]
    name = f"{_dist_name()}-{version}-py3-none-any.whl"
    info = f"{_dist_name()}-{version}.dist-info"
    entries = entries + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: eddy_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = "".join(f"{path},{_hash(data)}\n" for path, data in entries) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in entries + [(f"{info}/RECORD", record.encode())]:
            info_entry = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info_entry.external_attr = 0o644 << 16
            wheel.writestr(info_entry, data, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None) -> list:
    return []


get_requires_for_build_editable = get_requires_for_build_sdist = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    """A wheel holding the package (its Python files, WIT and componentize-py.toml)."""
    return _write_wheel(wheel_directory, [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    """A wheel whose .pth file puts this source directory on the path."""
    return _write_wheel(wheel_directory, [(f"{_dist_name()}.pth", f"{ROOT}\n".encode())])


def build_sdist(sdist_directory, config_settings=None) -> str:
    """A source archive of the package, its tests, this backend and the project files."""
    base = f"{_dist_name()}-{_project()['version']}"
    paths = _package_files() + [ROOT / "pyproject.toml", ROOT / "README.md", Path(__file__).resolve()]
    paths += sorted(p for p in (ROOT / "tests").glob("*.py"))
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as archive:
        for path in paths:
            if path.exists():
                archive.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(pkg_info)
        archive.addfile(entry, io.BytesIO(pkg_info))
    return name
