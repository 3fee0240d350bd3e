"""The `vitviz` command: `vitviz app | train | evaluate | average | space ...`, each with --help.

`python -m vitviz ...` is the same command; `python -m vitviz.train` (and .evaluate, .average,
.space) still work.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {  # subcommand -> (the module whose main() runs it, what it does)
    "app": ("vitviz.app.serve", "serve the app in a browser (127.0.0.1:7860)"),
    "train": ("vitviz.training.command", "train a ViT on CIFAR-10 or MNIST and save a checkpoint"),
    "evaluate": ("vitviz.evaluate", "a checkpoint's test (or validation) accuracy"),
    "explain": ("vitviz.explaining", "the maps of images or folders as PNG, .npy and JSON"),
    "faithfulness": ("vitviz.faithfulness", "how faithful each map is over many images (torchrun shards it)"),
    "average": ("vitviz.training.average", "the mean of several checkpoints' weights"),
    "space": ("vitviz.space", "write (and push) a Hugging Face Space folder"),
}


def usage() -> str:
    rows = "\n".join(f"  {name:<13} {about}" for name, (_, about) in COMMANDS.items())
    return f"usage: vitviz COMMAND [options]\n\ncommands:\n{rows}\n\n`vitviz COMMAND --help` says more about each."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"vitviz: no command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
