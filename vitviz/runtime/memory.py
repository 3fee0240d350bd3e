"""When freed memory goes back to the operating system.

glibc keeps the memory a finished training run freed (activations, optimizer moments, snapshots) in
its heap, so a long-lived app's resident size only grows: measured with benchmarks/memory.py, ten
finished runs from ten visitors left about 1.4 GB more than one, with no model or tensor of theirs
alive. `malloc_trim` returns the free part to the OS (`give_back`, after a run).

During a run the opposite holds: by default glibc returns the top of its heap each time a backward
pass frees the activations, and the next forward pass takes it back page by page (about 5,000 page
faults a step of the tutorial's model at batch 128). `reuse_freed` keeps it for the run.
Elsewhere (no glibc) both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


@functools.lru_cache(maxsize=1)
def reuse_freed() -> bool:
    """Keep freed memory in the heap for the next step (once per process): blocks up to 32 MB come from the
    heap, and its top is returned only above 1 GB free; `give_back` still returns it all after a run."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return all(
        libc.mallopt(option, value)
        for option, value in ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))
    )


def give_back() -> bool:
    """Collect garbage, then return the heap's free memory to the OS; True where that was possible."""
    gc.collect()
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
