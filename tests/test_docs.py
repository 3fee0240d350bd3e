"""Every command the README and docs/ give is still true: the program exists, answers --help, and knows every
option the text passes it. (What the commands print is checked by the tests of each part.)"""

import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"(?:^    |`)((?:vitviz|python -m vitviz[\w.]*|python benchmarks/\w+\.py)(?: [^`\n#]*)?)", re.M)


def commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for m in COMMAND.finditer(page.read_text()):
            found.append((page.name, m.group(1).strip()))
    return found


def program(words: list[str]) -> list[str]:
    """The words that name what runs: `vitviz train`, `python -m vitviz.space`, `python benchmarks/x.py`."""
    if words[0] == "vitviz":
        return words[:2] if len(words) > 1 and not words[1].startswith("-") else words[:1]
    if words[:2] == ["python", "-m"]:
        return [sys.executable, "-m", words[2]] + ([words[3]] if words[2] == "vitviz" and len(words) > 3 else [])
    return [sys.executable, str(ROOT / words[1])]


@cache
def help_text(prog: tuple[str, ...]) -> str:
    out = subprocess.run([*prog, "--help"], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, (prog, out.stderr[-1500:])
    return out.stdout


def test_every_command_and_every_benchmark_is_shown_in_the_docs():
    """Each of vitviz's commands, and each benchmark script that runs (one with a `__main__`), appears in the
    README or docs/ as a command a reader can copy."""
    from vitviz.cli import COMMANDS

    shown = {tuple(shlex.split(c)[:2]) for _, c in commands()}
    missing = [f"vitviz {name}" for name in COMMANDS if ("vitviz", name) not in shown]
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if "__main__" in script.read_text() and ("python", f"benchmarks/{script.name}") not in shown:
            missing.append(f"python benchmarks/{script.name}")
    assert not missing, missing


@pytest.mark.parametrize("page,command", commands(), ids=lambda v: v[:60] if isinstance(v, str) else v)
def test_every_command_exists_and_knows_its_options(page, command):
    words = shlex.split(command.replace("{", "").replace("}", "").replace("...", ""))
    prog = tuple(program(words))
    text = help_text(prog)
    for option in (w.split("=")[0] for w in words if w.startswith("--")):
        assert option in text, f"{page}: `{command}` passes {option}, which {' '.join(prog[-2:])} does not know"
