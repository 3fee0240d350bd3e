"""The pictures a visitor's page shows, encoded once each, fast.

Gradio would encode every returned array again on every answer (PNG at zlib's default
level: 10-20 ms for a large grid). A visitor's `PictureFiles` writes each new picture
once, as JPEG at quality 92 without chroma subsampling (about 2 ms for the largest grid;
text and grid lines stay sharp; exports stay lossless PNG), in parallel on the
machine's cores, and hands back the same file while the picture is unchanged; a
picture replaced by a new one has its file deleted RETIRE_S later (two overlapping
requests of one visitor: the first reply may still be on its way to Gradio's cache), and
the visitor's folder goes with them. The folder is held (vitviz.runtime.scratch) while the
visitor lives, so pruning never takes it.

Both write into one folder of this process that the app serves as it is (`served`, a static path of
Gradio's: a reply names the file, and Gradio neither hashes nor copies it into its cache), so a picture costs
its encoding and nothing more; the folder goes when the process ends.

An API caller has no state to keep files in: `ReplyFiles` writes its pictures into one shared folder, a
picture once (the same picture asked for again, by any caller, names the same file: it is the same image), and
deletes a file `REPLY_TTL_S` after a reply last named it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from vitviz.app.serving import gradio_internals as internals
from vitviz.runtime import scratch

RETIRE_S = 30.0  # a replaced picture's file is kept this long: a reply of the same visitor made a moment earlier
RETIRE_MOST = 200  # (two requests of one page overlap) may still name it while Gradio copies it
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vitviz-pictures")  # encoders let go of the GIL
_count = itertools.count()
_served: Path | None = None
_served_lock = threading.Lock()


def served() -> Path:
    """This process's folder of pictures that the app serves as they are (made, and given to Gradio as a static
    path, on the first call)."""
    global _served
    with _served_lock:
        if _served is None or not _served.is_dir():
            _served = scratch.new_folder("served")
            scratch.hold(_served)
            internals.serve_first(_served)
        return _served


def is_served(path: str) -> bool:
    """Whether `path` is one of the pictures the app serves as they are (never copied into Gradio's cache)."""
    return _served is not None and os.path.dirname(os.path.dirname(os.path.abspath(path))) == str(_served)


def file_name(name: str, picture: np.ndarray) -> str:
    """A new file's name for `picture` shown as `name`: unique in the process, and carrying where a phone keeps
    its words in view while it scrolls (draw.Marked's `frozen`: "-f<left>-<top>-<bottom>", read by the page's
    script in vitviz.app.scrolled)."""
    frozen = getattr(picture, "frozen", None)
    return f"{name}-{next(_count)}" + ("-f{}-{}-{}".format(*frozen) if frozen else "") + ".jpg"


def write_picture(picture: np.ndarray, path: Path) -> str:
    Image.fromarray(np.ascontiguousarray(picture, dtype=np.uint8)).save(path, format="JPEG", quality=92, subsampling=0)
    return str(path)


class FileOf:
    """The file each picture was written to, by the picture itself (held weakly: its entry goes with it)."""

    def __init__(self):
        self._files: dict[int, tuple[weakref.ref, str]] = {}  # id of a picture -> (the picture, its file)

    def get(self, picture: np.ndarray) -> str | None:
        kept = self._files.get(id(picture))
        return kept[1] if kept is not None and kept[0]() is picture else None

    def put(self, picture: np.ndarray, path: str) -> None:
        key = id(picture)

        def gone(ref: weakref.ref) -> None:  # another picture may hold its id by now
            if self._files.get(key, (None,))[0] is ref:
                self._files.pop(key, None)

        self._files[key] = (weakref.ref(picture, gone), path)

    def clear(self) -> None:
        self._files.clear()

    def __len__(self) -> int:
        return len(self._files)


_ENCODED = FileOf()  # every picture encoded in this process, and a file it was encoded to


def write_once(picture: np.ndarray, path: Path) -> str:
    """`picture` at `path`: a hard link to a file it was encoded to before, for any visitor or caller, while that
    file is there (a picture shared by everyone who sends the same image: vitviz.app.serving.shared), else
    encoded now. Each name is its own: deleting one leaves the other."""
    before = _ENCODED.get(picture)
    if before is not None:
        try:
            os.link(before, path)
            return str(path)
        except OSError:  # that file went (its visitor left, or it was swept): encode it again
            pass
    _ENCODED.put(picture, write_picture(picture, path))
    return str(path)


class PictureFiles:
    """name -> the file of the picture last handed out under that name."""

    def __init__(self):
        self._folder: Path | None = None
        self._files: dict[str, tuple[np.ndarray, str]] = {}  # name -> (the picture handed out, its file)
        self._retired: deque[tuple[float, str]] = deque()  # replaced files, deleted once no reply can still name them

    def _where(self) -> Path:
        if self._folder is None or not self._folder.is_dir():
            self._folder = scratch.new_folder("pictures", served())
            self._files.clear()
            scratch.hold(self._folder)
            weakref.finalize(self, _remove, str(self._folder))
        return self._folder

    def paths(self, pictures: dict[str, np.ndarray]) -> dict[str, str]:
        """{name: file} for `pictures`; only pictures not handed out before are written."""
        folder, out, todo = self._where(), {}, {}
        for name, pic in pictures.items():
            hit = self._files.get(name)
            if hit is not None and hit[0] is pic and Path(hit[1]).exists():
                out[name] = hit[1]
            else:
                todo[name] = _POOL.submit(write_once, pic, folder / file_name(name, pic))
        now = time.monotonic()
        for name, job in todo.items():
            old = self._files.get(name)
            out[name] = job.result()
            self._files[name] = (pictures[name], out[name])
            if old is not None and old[1] != out[name]:
                self._retired.append((now, old[1]))
        while self._retired and (now - self._retired[0][0] > RETIRE_S or len(self._retired) > RETIRE_MOST):
            Path(self._retired.popleft()[1]).unlink(missing_ok=True)
        return out

    def clear(self) -> None:
        if self._folder is not None:
            _remove(str(self._folder))
        self._folder = None
        self._files.clear()
        self._retired.clear()


def _remove(folder: str):
    scratch.let_go(folder)
    shutil.rmtree(folder, ignore_errors=True)


REPLY_TTL_S = 300


class ReplyFiles:
    """PictureFiles' interface for callers without state, in one folder shared by all callers: a picture is
    written once and its file named again while the very same picture is asked for (an explanation's pictures are
    drawn once for everyone who sends that image: vitviz.app.serving.shared), each file deleted `ttl_s` after
    its last reply named it (Gradio serves it from there)."""

    def __init__(self, ttl_s: float = REPLY_TTL_S):
        self.ttl_s = ttl_s
        self._folder: Path | None = None
        self._lock = threading.Lock()  # held while a file is named again or swept: never both at once
        self._swept = 0.0
        self._written = FileOf()  # the file each picture was written to here

    def _where(self) -> Path:
        with self._lock:
            if self._folder is None or not self._folder.is_dir():
                self._folder = scratch.new_folder("replies", served())
                scratch.hold(self._folder)
                self._written.clear()
            folder, now = self._folder, time.time()
            if now - self._swept > self.ttl_s / 10:
                self._swept = now
                for f in folder.glob("*.jpg"):
                    try:
                        if now - f.stat().st_mtime > self.ttl_s:
                            f.unlink()
                    except OSError:
                        pass
        return folder

    def paths(self, pictures: dict[str, np.ndarray]) -> dict[str, str]:
        folder, out = self._where(), {}
        with self._lock:
            for name, pic in pictures.items():
                kept = self._written.get(pic)
                if kept is not None and _named_again(kept):
                    out[name] = kept
        jobs = {
            name: _POOL.submit(write_once, pic, folder / file_name(name, pic))
            for name, pic in pictures.items()
            if name not in out
        }
        for name, job in jobs.items():
            out[name] = job.result()
            with self._lock:
                self._written.put(pictures[name], out[name])
        return out

    def clear(self) -> None:
        """Nothing to let go: the files are the callers' replies, deleted by age."""


def _named_again(path: str) -> bool:
    """Keep the file `path` another REPLY_TTL_S (False if it is gone)."""
    try:
        os.utime(path)
        return True
    except OSError:
        return False


REPLIES = ReplyFiles()
