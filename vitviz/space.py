"""Write a folder that Hugging Face Spaces accepts and runs, and optionally upload it.

    python -m vitviz.space OUT [--hardware cpu|zerogpu] [--push REPO_ID]

The folder holds app.py, the vitviz package with its example gallery, the shipped checkpoints,
a README.md whose front matter Spaces reads (sdk, the Gradio version this was tested with, the app
file, a Python version fit for the hardware), the requirements for that hardware (ZeroGPU: a torch
and torchvision pair it supports, and `spaces`), and a .gitattributes that routes every binary file
through LFS/Xet, as the Hub requires. No file may be over 10 MB. `--push` uploads the folder with
huggingface_hub (which stores the binaries through LFS/Xet itself); it needs a token and internet.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_BYTES = 10 * 2**20
# What each kind of hardware runs: its Python, and the torch pins it needs (ZeroGPU supports torch
# 2.8.0, 2.9.1, 2.10.0 and 2.11.0 on Python 3.10 or 3.12; the CPU path was run there on 2.11.0 / 0.26.0).
HARDWARE = {
    "cpu": {"python": "3.11", "pins": ["torch==2.14.1", "torchvision==0.29.1"]},
    "zerogpu": {"python": "3.12", "pins": ["torch==2.11.0", "torchvision==0.26.0", "spaces"]},
}
BINARY = (".safetensors", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".npy", ".npz", ".zip", ".pt", ".bin")


def _requirements(hardware: str) -> str:
    import gradio

    rest = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith(("torch==", "torchvision==", "gradio", "#"))
    ]
    return "\n".join(HARDWARE[hardware]["pins"] + [f"gradio[mcp]=={gradio.__version__}"] + rest) + "\n"


def preloaded() -> list[str]:
    """The model menu's Hub entries as `preload_from_hub` lines ("<repository> <files>"): a Space downloads them
    when it is built (timm's weights; a transformers model's config, weights, processor and tokenizer)."""
    from vitviz.app.menu import SHARED
    from vitviz.models.hf_vit import HUB_FILES

    timm = [f"{key} model.safetensors" for key in SHARED if key.startswith("timm/")]
    return timm + [f"{key.removeprefix('hf:')} {','.join(HUB_FILES)}" for key in SHARED if key.startswith("hf:")]


def _readme(hardware: str) -> str:
    import gradio

    front = {
        "title": "vitviz",
        "emoji": "🔍",
        "colorFrom": "indigo",
        "colorTo": "yellow",
        "sdk": "gradio",
        "sdk_version": gradio.__version__,
        "app_file": "app.py",
        "python_version": f'"{HARDWARE[hardware]["python"]}"',  # quoted: YAML would read 3.10 as 3.1
        "pinned": "false",
        "license": "mit",
        "short_description": "See how a Vision Transformer sees",
    }
    preload = [f"  - {line}" for line in preloaded()]  # the menu's Hub weights, there at boot
    lines = (
        ["---"]
        + [f"{k}: {v}" for k, v in front.items()]
        + ["preload_from_hub:"] * bool(preload)
        + preload
        + ["---", ""]
    )
    where = (
        "ZeroGPU (a GPU is attached for each training run; set the Space's hardware to ZeroGPU)"
        if hardware == "zerogpu"
        else "CPU"
    )
    return "\n".join(lines) + (
        "# vitviz: see how a Vision Transformer sees\n\n"
        "Upload an image and look inside a ViT: its patch grid, attention for every layer and head and from any "
        "patch you click, attention rollout and gradient rollout; train a small ViT live in the Train tab.\n\n"
        f"This Space runs on {where}. The limits a public app needs (run length, queue, memory, uploads) are "
        "set by environment variables listed in the project's README.\n"
    )


def _copy_sources(out: Path):
    shutil.copy2(ROOT / "app.py", out / "app.py")
    shutil.copytree(ROOT / "vitviz", out / "vitviz", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("cifar10", "mnist"):
        dst = out / "checkpoints" / name
        dst.mkdir(parents=True)
        for f in ("model.safetensors", "model.json"):
            shutil.copy2(ROOT / "checkpoints" / name / f, dst / f)


def _is_binary(path: Path) -> bool:
    if path.suffix.lower() in BINARY:
        return True
    with open(path, "rb") as f:
        return b"\0" in f.read(8192)


def _gitattributes(out: Path) -> str:
    """LFS/Xet rules for every binary file in the folder: by extension, and by name for any other."""
    exts, names = set(), []
    for p in sorted(out.rglob("*")):
        if p.is_file() and _is_binary(p):
            if p.suffix.lower() in BINARY:
                exts.add(p.suffix.lower())
            else:
                names.append(p.relative_to(out).as_posix())
    rules = [f"*{e} filter=lfs diff=lfs merge=lfs -text" for e in sorted(exts)]
    return "\n".join(rules + [f"{n} filter=lfs diff=lfs merge=lfs -text" for n in names]) + "\n"


def write(out: str | Path, hardware: str = "cpu") -> Path:
    """Write the Space folder at `out` (which must not exist yet, or be empty); returns its path."""
    if hardware not in HARDWARE:
        raise ValueError(f"hardware must be one of {', '.join(HARDWARE)}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty; give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    _copy_sources(out)
    (out / "requirements.txt").write_text(_requirements(hardware))
    (out / "README.md").write_text(_readme(hardware))
    (out / ".gitattributes").write_text(_gitattributes(out))
    big = [
        f"{p.relative_to(out)} ({p.stat().st_size / 2**20:.1f} MB)"
        for p in out.rglob("*")
        if p.is_file() and p.stat().st_size > MAX_FILE_BYTES
    ]
    if big:
        raise ValueError("files over 10 MB would be refused or slow on a Space: " + ", ".join(big))
    return out


def push(out: Path, repo_id: str) -> None:
    """Upload the folder as a Gradio Space (huggingface_hub sends the binaries through LFS/Xet)."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
    api.upload_folder(folder_path=str(out), repo_id=repo_id, repo_type="space")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vitviz space", description=__doc__.split("\n")[0])
    p.add_argument("out", help="a new folder for the Space")
    p.add_argument("--hardware", choices=sorted(HARDWARE), default="cpu")
    p.add_argument("--push", metavar="REPO_ID", help="also upload it, e.g. you/vitviz (needs a token and internet)")
    a = p.parse_args(argv)
    try:
        out = write(a.out, a.hardware)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    n = sum(1 for f in out.rglob("*") if f.is_file())
    print(f"wrote {out}: {n} files for {a.hardware} hardware")
    if a.push:
        push(out, a.push)
        print(f"uploaded to the Space {a.push}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
