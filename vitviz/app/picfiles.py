"""The pictures a visitor's page shows, encoded once each, fast.

Gradio would encode every returned array again on every answer (PNG at zlib's default
level: 10-20 ms for a large grid). A visitor's `PictureFiles` writes each new picture
once, as JPEG at quality 92 without chroma subsampling (about 2 ms for the largest grid;
text and grid lines stay sharp; exports stay lossless PNG), in parallel on the
machine's cores, and hands back the same file while the picture is unchanged; a
picture replaced by a new one has its file deleted, and the visitor's folder goes with
them (or with scratch's pruning, after which a picture is simply written again).
"""
from __future__ import annotations

import itertools
import shutil
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from .. import scratch

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vitviz-pictures")  # encoders let go of the GIL
_count = itertools.count()


def write_picture(picture: np.ndarray, path: Path) -> str:
    Image.fromarray(np.ascontiguousarray(picture, dtype=np.uint8)).save(path, format="JPEG", quality=92,
                                                                         subsampling=0)
    return str(path)


class PictureFiles:
    """name -> the file of the picture last handed out under that name."""

    def __init__(self):
        self._folder: Path | None = None
        self._files: dict[str, tuple[np.ndarray, str]] = {}  # name -> (the picture handed out, its file)

    def _where(self) -> Path:
        if self._folder is None or not self._folder.is_dir():
            self._folder = scratch.new_folder("pictures")
            self._files.clear()
            weakref.finalize(self, shutil.rmtree, str(self._folder), True)
        return self._folder

    def paths(self, pictures: dict[str, np.ndarray]) -> dict[str, str]:
        """{name: file} for `pictures`; only pictures not handed out before are written."""
        folder, out, todo = self._where(), {}, {}
        for name, pic in pictures.items():
            hit = self._files.get(name)
            if hit is not None and hit[0] is pic and Path(hit[1]).exists():
                out[name] = hit[1]
            else:
                todo[name] = _POOL.submit(write_picture, pic, folder / f"{name}-{next(_count)}.jpg")
        for name, job in todo.items():
            old = self._files.get(name)
            out[name] = job.result()
            self._files[name] = (pictures[name], out[name])
            if old is not None and old[1] != out[name]:
                Path(old[1]).unlink(missing_ok=True)
        return out

    def clear(self):
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = None
        self._files.clear()
