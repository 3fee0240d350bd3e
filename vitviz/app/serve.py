"""`vitviz app`: serve the app from this machine, on 127.0.0.1:7860 unless told otherwise.

GRADIO_SERVER_NAME and GRADIO_SERVER_PORT set the defaults of --host and --port; on a Hugging
Face Space (SPACE_ID set) the host is 0.0.0.0, and downloaded weights go to its persistent
storage when it has one.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Gradio is imported only once the environment is set (main)
    import gradio as gr


def prepare_environment() -> None:
    """What must be set before Gradio and torch are imported."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if os.environ.get("SPACE_ID") and os.access("/data", os.W_OK):  # a Space with persistent storage:
        os.environ.setdefault("TORCH_HOME", "/data/torch")  # downloaded weights (ViT-B/16) survive restarts


def parser() -> argparse.ArgumentParser:
    on_spaces = bool(os.environ.get("SPACE_ID"))
    p = argparse.ArgumentParser(
        prog="vitviz app", description="Serve the vitviz app (the shipped models, training, every tab) in a browser."
    )
    p.add_argument(
        "--host",
        default=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0" if on_spaces else "127.0.0.1"),
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        help="port to listen on (default 7860)",
    )
    p.add_argument(
        "--no-mcp",
        action="store_true",
        help="no MCP server for agents (by default its tools are served at /gradio_api/mcp/ beside the page)",
    )
    return p


def main(argv: list[str] | None = None, demo: gr.Blocks | None = None) -> int:
    """Serve `demo` (built here when None) until the process is stopped."""
    a = parser().parse_args(argv)
    prepare_environment()
    from vitviz.app.shell import build_demo, launch

    launch(demo or build_demo(), server_name=a.host, server_port=a.port, mcp_server=not a.no_mcp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
