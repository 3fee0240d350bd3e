"""Write several files as one set: a process killed at any moment leaves the old set or the new one.

Each file is first written beside its final name as ``.NAME.new``. Then one small
marker, ``.STEM.commit``, listing the renames is itself put in place by an atomic
rename: that is the moment the new set exists. The renames follow and the marker
goes. Whoever next reads or writes the set calls `recover` first: a marker still
there means the renames were interrupted, so they are finished; ``.new`` files
without a marker are from a write that never committed, so they are deleted
(together with any stray ``.tmp`` files), and the old set stands.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path


def _staged(path: Path) -> Path:
    return path.with_name(f".{path.name}.new")


def write_set(marker: Path, files: dict[Path, Callable[[Path], None]]) -> None:
    """Write every `files[path](tmp_path)` and then move them all into place as one set."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    recover(marker, list(files))
    for path, write in files.items():
        write(_staged(path))
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(json.dumps([[_staged(p).name, p.name] for p in files]))
    os.replace(tmp, marker)  # the commit point
    _finish(marker)


def _finish(marker: Path):
    for staged, final in json.loads(marker.read_text()):
        src = marker.parent / staged
        if src.exists():
            os.replace(src, marker.parent / final)
    marker.unlink()


def recover(marker: Path, paths: list[Path]) -> None:
    """Finish a committed write that was interrupted; drop the files of one that never committed."""
    try:
        if marker.exists():
            _finish(marker)
        for p in paths:
            _staged(p).unlink(missing_ok=True)
            for stray in p.parent.glob(f".{p.name}.tmp*"):
                stray.unlink(missing_ok=True)
        marker.with_name(marker.name + ".tmp").unlink(missing_ok=True)
    except (OSError, ValueError):  # a read-only folder (the shipped models) or a damaged marker: leave it
        pass
