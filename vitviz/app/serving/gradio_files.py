"""Gradio's cache of uploaded and answered files: this process's own, bounded in size as well as in age, and
emptied at exit.

Gradio keeps a file under its cache folder by the hash of its content, so two apps on one host
sharing that folder share the copies of the same examples: one app's cleanup would delete what the
other still serves. `own_folder` gives this process a folder of its own inside Gradio's
(`<GRADIO_TEMP_DIR or the system's temp folder/gradio>/vitviz-<pid>-*`, set as GRADIO_TEMP_DIR
before any component reads it); `remove_own` deletes it at exit, and the folders of processes
that are gone (killed without their cleanup) are deleted when the next app starts.

Gradio copies every file a reply names into its cache and deletes copies only by age
(VITVIZ_CACHE_MAX_AGE_S). Each /explain adds about 0.2 MB, so a busy public app would fill
its disk long before an hour has passed. The bound, `VITVIZ_CACHE_MAX_MB` (default 500), holds
at every moment: `make_room` runs before each write (a reply's files and pictures, from
vitviz.app.serving.public.PublicBlocks.postprocess_data; an upload, from the `UploadRoom` middleware) and
deletes the oldest tracked files until what is there, what writes under way reserved and the new
bytes fit; `SizeBound` also checks every `VITVIZ_CACHE_CHECK_S` seconds (default 5). Replies'
copies go first (a page shows its pictures as soon as its reply arrives, so the oldest copies are
the ones nobody is waiting for), visitors' uploads only when that is not enough. `remove_all`
deletes the files a Blocks cached for visitors when it closes.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path

import anyio
import gradio as gr

from vitviz.app.serving import gradio_internals as internals
from vitviz.app.serving import limits
from vitviz.app.serving.picfiles import is_served
from vitviz.runtime import scratch

_own: Path | None = None
_own_lock = threading.Lock()
OWN = re.compile(r"^vitviz-(\d+)-")


def own_folder() -> Path:
    """This process's folder for Gradio's files (made, and set as GRADIO_TEMP_DIR, on the first call)."""
    global _own
    with _own_lock:
        if _own is None or not _own.is_dir():
            base = Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")
            if OWN.match(base.name):  # inherited from the process that started this one: a sibling, not a child
                base = base.parent
            base.mkdir(parents=True, exist_ok=True)
            _prune_gone(base)
            _own = Path(tempfile.mkdtemp(prefix=f"vitviz-{os.getpid()}-", dir=base))
            os.environ["GRADIO_TEMP_DIR"] = str(_own)
        return _own


def _prune_gone(base: Path) -> None:
    """Delete the folders of vitviz processes that no longer run."""
    for folder in base.glob("vitviz-*-*"):
        found = OWN.match(folder.name)
        if found and folder.is_dir() and int(found.group(1)) != os.getpid() and not scratch.alive(int(found.group(1))):
            shutil.rmtree(folder, ignore_errors=True)


def remove_own() -> None:
    """Delete this process's folder of Gradio's files, everything in it (at exit)."""
    global _own
    with _own_lock:
        folder, _own = _own, None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def tracked(blocks: gr.Blocks, everything: bool = False) -> list[tuple[bool, float, int, str]]:
    """(is an upload, ctime, size, path) of every file the Blocks track that still exists: the copies of replies
    first, oldest first, then the visitors' uploads, oldest first (an upload may still be in use: a visitor
    explores one image for many calls, so uploads go last). The files Gradio keeps for the page itself (the
    examples) are left out unless `everything`."""
    keep = set() if everything else internals.kept_in_cache(blocks)
    uploads = internals.upload_set(blocks)
    out = []
    for files in internals.tracked_sets(blocks):
        for path in list(files):
            if path in keep:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            out.append((path in uploads, st.st_ctime, st.st_size, path))
    return sorted(set(out))


def _forget(blocks, path: str):
    for files in internals.tracked_sets(blocks):
        files.discard(path)
    parent = Path(path).parent
    try:
        parent.rmdir()  # Gradio keeps each file in a folder named by its hash; an empty one goes too
    except OSError:
        pass


def enforce(blocks: gr.Blocks | list, max_bytes: float) -> int:
    """Delete the oldest tracked files until they take at most 80% of `max_bytes` (only when over it); returns
    how many were deleted. `blocks` is one Blocks or several (the apps of this process share its folder: their
    files are counted together, and the oldest of all go first)."""
    group = list(blocks) if isinstance(blocks, (list, tuple)) else [blocks]
    owner: dict[str, object] = {}
    files = []
    for b in group:
        for f in tracked(b):
            if f[3] not in owner:
                owner[f[3]] = b
                files.append(f)
    files.sort()
    total = sum(size for _, _, size, _ in files)
    if total <= max_bytes:
        return 0
    removed = 0
    for _, _, size, path in files:
        if total <= 0.8 * max_bytes:
            break
        try:
            os.remove(path)
        except OSError:
            pass
        for b in group:
            _forget(b, path)
        total -= size
        removed += 1
    return removed


def total_bytes(blocks: gr.Blocks) -> int:
    return sum(size for _, _, size, _ in tracked(blocks))


RESERVE_S = 10.0  # the longest a write's reservation lasts (Gradio copies a reply's files within moments)
_bounded: weakref.WeakSet = weakref.WeakSet()  # the Blocks whose cache is bounded
_reserved: dict[int, tuple[float, int, tuple[str, ...]]] = {}  # token -> (until when, bytes, the files' names)
_tokens = iter(range(1, 2**62))
_room = threading.Lock()


class TooBig(Exception):
    """A write larger than the whole cache bound: it cannot be made to fit."""


def make_room(nbytes: int, names: tuple[str, ...] = ()) -> int:
    """Before `nbytes` are written into Gradio's cache (the copies of a reply's files called `names`, or an
    upload): delete the oldest tracked files until what is there, what the other writes under way reserved and
    these bytes fit VITVIZ_CACHE_MAX_MB, so that the bound holds when the write lands, not only at the next
    check. A reply's files are reserved whole, those whose copy is there already too (a copy let go now would be
    written again). Returns the reservation's token: `release` ends it, and it ends by itself once every named
    copy is tracked, or after RESERVE_S. TooBig when `nbytes` alone is over the bound."""
    limit = limits.get("VITVIZ_CACHE_MAX_MB") * 2**20
    if nbytes > limit:
        raise TooBig(f"{nbytes / 2**20:.1f} MB is more than the {limit / 2**20:g} MB this app's cache may hold")
    with _room:
        now = time.monotonic()
        landed = {os.path.basename(p) for blocks in list(_bounded) for *_, p in tracked(blocks)}
        for token, (until, _, named) in list(_reserved.items()):
            if until <= now or (named and landed.issuperset(named)):
                del _reserved[token]
        room = limit - nbytes - sum(n for _, n, _ in _reserved.values())
        enforce(list(_bounded), max(room, 0))  # the apps of this process together, down to 80% of the room left
        token = next(_tokens)
        _reserved[token] = (now + RESERVE_S, nbytes, tuple(names))
        return token


def reply_size(value: object) -> tuple[int, tuple[str, ...]]:
    """(bytes at most, file names) of what Gradio will write into its cache for a reply: the files it names (their
    sizes; not the pictures the app serves as they are) and the arrays it holds (encoded to PNG, a little over
    their raw size at most)."""
    import numpy as np

    total, names, todo = 0, [], [value]
    while todo:
        v = todo.pop()
        if isinstance(v, np.ndarray):
            total += int(v.nbytes * 1.01) + 4096
        elif isinstance(v, (str, os.PathLike)) and len(str(v)) < 4096 and not is_served(str(v)) and os.path.isfile(v):
            total += os.path.getsize(v)
            names.append(os.path.basename(v))
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return total, tuple(names)


def release(token: int) -> None:
    """The write `token` reserved room for has landed (or failed): its bytes are counted where they are."""
    with _room:
        _reserved.pop(token, None)


class UploadRoom:
    """ASGI middleware: room is made for an upload (its Content-Length, else the largest upload allowed) before
    Gradio writes it; one larger than the whole bound is refused with a sentence."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].rstrip("/").endswith("/upload"):
            length = dict(scope.get("headers") or []).get(b"content-length", b"")
            nbytes = int(length) if length.isdigit() else int(limits.get("VITVIZ_MAX_UPLOAD_MB") * 2**20)
            try:
                token = await anyio.to_thread.run_sync(make_room, nbytes)
            except TooBig as e:
                from fastapi.responses import JSONResponse

                sentence = f"This upload cannot be kept: {e}."
                await JSONResponse(status_code=413, content={"detail": sentence, "error": sentence})(
                    scope, receive, send
                )
                return
            try:
                await self.app(scope, receive, send)
            finally:
                release(token)  # the upload is in the cache now (or was refused): counted as a file from here
            return
        await self.app(scope, receive, send)


class SizeBound:
    """Keeps the Blocks' cached files under VITVIZ_CACHE_MAX_MB: it counts them among the bounded ones that
    `make_room` clears before every write, and a daemon thread checks every VITVIZ_CACHE_CHECK_S for anything
    written otherwise."""

    def __init__(self, blocks):
        self.blocks = blocks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vitviz-cache-bound", daemon=True)

    def start(self) -> SizeBound:
        _bounded.add(self.blocks)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(limits.get("VITVIZ_CACHE_CHECK_S")):
            try:
                with _room:
                    enforce(list(_bounded) or [self.blocks], limits.get("VITVIZ_CACHE_MAX_MB") * 2**20)
            except Exception:  # noqa: BLE001 - the bound must never stop the app; it tries again next time
                pass

    def stop(self) -> None:
        _bounded.discard(self.blocks)
        self._stop.set()


def remove_all(blocks: gr.Blocks) -> None:
    """Delete the files these Blocks cached for visitors (uploads and replies). The page's own files (the
    examples) stay while the process lives: another Blocks of this process may serve the same copies; they go
    with `remove_own` at exit."""
    for *_, path in tracked(blocks):
        try:
            os.remove(path)
        except OSError:
            pass
        _forget(blocks, path)
