"""Folders the app makes for visitors (run checkpoints, exports, random test images, the encoded pictures
a page shows), and their pruning.

Every such folder is `<VITVIZ_WORK_DIR>/vitviz-<kind>-<pid>-*` (default: the system's temporary
folder); before a new one is made, all but the newest `VITVIZ_KEEP_FOLDERS` (default 20) of
that kind are deleted, so a long-lived app, and one restarted many times, never fills its disk.
Another vitviz process that still runs keeps its folders: two apps on one host never prune each other.
A folder this process still uses (`hold`) is never pruned: a busy app with more visitors than
`VITVIZ_KEEP_FOLDERS` would otherwise delete a visitor's pictures between writing them and
Gradio reading them. `remove_own` deletes every folder this process made, at exit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

KINDS = ("run", "export", "image", "stop", "pictures", "replies", "served")
_held: set[str] = set()  # folders in use by this process: never pruned
_made: set[str] = set()  # every folder this process made
_lock = threading.Lock()


def root() -> Path:
    return Path(os.environ.get("VITVIZ_WORK_DIR") or tempfile.gettempdir())


def keep_default() -> int:
    return max(1, int(os.environ.get("VITVIZ_KEEP_FOLDERS", "20")))


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _others(folder: Path, kind: str) -> bool:
    """Whether `folder` belongs to another vitviz process that still runs (its name carries the pid): another
    app on this host prunes only its own folders and those of processes that are gone."""
    pid, dash, _ = folder.name.removeprefix(f"vitviz-{kind}-").partition("-")
    return bool(dash and pid.isdigit()) and int(pid) not in (0, os.getpid()) and alive(int(pid))


def prune(kind: str, keep: int | None = None, where: str | Path | None = None) -> None:
    """Delete all but the `keep` newest folders of this kind (another running app's are left alone)."""
    keep = keep_default() if keep is None else keep
    with _lock:
        held = set(_held)
    folders = [
        p
        for p in Path(where or root()).glob(f"vitviz-{kind}-*")
        if p.is_dir() and str(p) not in held and not _others(p, kind)
    ]
    folders.sort(key=lambda p: p.stat().st_mtime)
    for d in folders[: max(0, len(folders) - keep)]:
        shutil.rmtree(d, ignore_errors=True)


def new_folder(kind: str, parent: Path | None = None) -> Path:
    """A fresh folder of this kind (in `parent`, else the work folder), after pruning the old ones there to make
    room for it."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    where = parent or root()
    where.mkdir(parents=True, exist_ok=True)
    prune(kind, keep_default() - 1, where)
    folder = tempfile.mkdtemp(prefix=f"vitviz-{kind}-{os.getpid()}-", dir=where)
    with _lock:
        _made.add(folder)
    return Path(folder)


def hold(folder: str | Path) -> None:
    """Keep `folder` from being pruned until `let_go`."""
    with _lock:
        _held.add(str(folder))


def let_go(folder: str | Path) -> None:
    with _lock:
        _held.discard(str(folder))


def remove_own() -> None:
    """Delete every folder this process made (the app's normal exit)."""
    with _lock:
        made = list(_made)
        _made.clear()
        _held.clear()
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def prune_all() -> None:
    """At start-up: what earlier runs of the app left is pruned like what this one makes."""
    for kind in KINDS:
        prune(kind)
