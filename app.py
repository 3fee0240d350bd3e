"""vitviz: see how a Vision Transformer sees. `python app.py` serves on 127.0.0.1:7860 (as `vitviz app`;
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT override); the same file runs on Hugging Face Spaces."""

from vitviz.app import serve

serve.prepare_environment()

from vitviz.app import build_demo  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    raise SystemExit(serve.main(demo=demo))
