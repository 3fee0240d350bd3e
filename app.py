"""vitviz: see how a Vision Transformer sees. `python app.py` serves on 127.0.0.1:7860
(GRADIO_SERVER_NAME / GRADIO_SERVER_PORT override); the same file runs on Hugging Face Spaces."""
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
if os.environ.get("SPACE_ID") and os.access("/data", os.W_OK):  # a Space with persistent storage:
    os.environ.setdefault("TORCH_HOME", "/data/torch")  # downloaded weights (ViT-B/16) survive restarts

from vitviz.app import build_demo, launch  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    on_spaces = bool(os.environ.get("SPACE_ID"))
    launch(demo, server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0" if on_spaces else "127.0.0.1"),
           server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
