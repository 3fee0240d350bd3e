"""The app's tools for agents: what vitviz shows, as MCP tools (`vitviz app` serves them beside the page).

Each tool is a public endpoint of its own (also callable through gradio_client and REST), described to an agent
by its docstring and type hints: what it returns and how to read it. Each answers its pictures as PNG images and
its numbers as one JSON text, drawn by the same code as the page (the Explore, Step by step, Take patches away
and Compare tabs), and reads its values with the page's sentences. The tools run outside Gradio's queue, whose
answer to an agent that sends no progress token is the text of the first output alone, with no picture; they
keep their own bound instead (vitviz.app.serving.calls), and every other bound of the public app holds.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable

import gradio as gr
import numpy as np
import torch

from vitviz.app.inputs import PREDICTED, ImagePayload, choice, layer_index, selected_token, whole
from vitviz.app.menu import DOWNLOAD_MB, SHARED, in_words, on_machine, resolve_model
from vitviz.app.selection import select
from vitviz.app.serving.calls import SLOTS
from vitviz.app.state import visitor
from vitviz.app.tabs import compare as compare_tab
from vitviz.app.tabs import removal as removal_tab
from vitviz.app.tabs.explore import explore_view
from vitviz.app.tabs.steps import STAGES, step_view
from vitviz.explain.methods import CLASS_MAPS, METHODS
from vitviz.models.bound import max_params
from vitviz.pictures import explore as explore_pictures

ROLLOUT = "attention rollout"
EXPLAIN_METHODS = [*CLASS_MAPS, ROLLOUT]
STAGE_NAMES = [name for name, _ in STAGES]


def _numbers(value: dict) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False)


def _grid(values: torch.Tensor, grid: tuple[int, int]) -> list[list[float]]:
    """(P,) values as rows of the patch grid, rounded to 6 significant digits."""
    return [[float(f"{v:.6g}") for v in row] for row in values.float().view(*grid).tolist()]


def _top(values: torch.Tensor, k: int = 5) -> list[int]:
    return values.float().topk(min(k, values.numel())).indices.tolist()


def list_models() -> str:
    """The models this app can explain, and how to name any other one.

    Returns:
        JSON: "models", one per menu entry (its key for the other tools' `model`, what it is, whether its
        weights are on this machine, else the size of their download); "also": the other names a tool's `model`
        takes; "largest_parameters": the most parameters a model named here may have.
    """
    models = [
        {"model": key, "what": title, "on_this_machine": on_machine(key), "download_mb": DOWNLOAD_MB.get(key, 0)}
        for key, title in SHARED.items()
    ]
    also = {
        "timm/<name>": "any timm ViT by its name, e.g. timm/vit_base_patch16_224.augreg_in21k_ft_in1k",
        "hf:<org>/<repo>": "a Hugging Face transformers ViT, DeiT, DINOv2 (with registers), DINOv3, CLIP or SigLIP",
    }
    return _numbers({"models": models, "also": also, "largest_parameters": max_params()})


def predict(image: ImagePayload, model: str = "cifar10", k: float = 5, labels: str = "", template: str = "") -> str:
    """The model's top-k classes for an image, with their probabilities.

    Args:
        image: the image, as a URL or an upload.
        model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>".
        k: how many classes (1 to the model's number of classes).
        labels: for CLIP or SigLIP: the classes in words, comma-separated (empty: ten everyday ones).
        template: for CLIP or SigLIP: the prompt each label is written into, one {} (empty: "a photo of a {}.").
    Returns:
        JSON: "top", the k classes most probable first, each with its probability; "rule": how the probabilities
        are made (a softmax over the classes, or for SigLIP each label's own sigmoid, which need not sum to 1).
    """
    with SLOTS.taken():
        v = visitor(None)
        s = select(v, image, model, labels or None, template or None)
        classes = s.model.card.classes
        if not classes:
            raise gr.Error(_no_classifier(s.model.card.title, "predicts no class"))
        k = whole(k, "k", 1, len(classes), default=5)
        with torch.inference_mode():
            probs = s.model.probabilities(s.model(s.model.tensor(s.pixels))[0].float())
        p, i = probs.topk(k)
        rule = "each label's own sigmoid" if s.model.sigmoid else "softmax over the classes"
        top = [{"class": classes[j], "probability": float(f"{q:.6g}")} for q, j in zip(p.tolist(), i.tolist())]
        return _numbers({"model": s.model.card.title, "top": top, "rule": rule})


def _no_classifier(title: str, what: str) -> str:
    return (
        f"The {title} has no classifier (it learned its features without labels): it {what}. Ask for "
        f"method '{ROLLOUT}', or the attention tool."
    )


def explain(
    image: ImagePayload,
    model: str = "cifar10",
    method: str = "gradient rollout",
    target: str = "",
    token: float = -1,
    labels: str = "",
    template: str = "",
) -> tuple[np.ndarray, str]:
    """One map of where the model looks in an image: a class map (gradient rollout, LeGrad, occlusion) for a
    class or label, or attention rollout from a token.

    Args:
        image: the image, as a URL or an upload.
        model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>".
        method: "gradient rollout", "LeGrad", "occlusion" (one forward pass per patch) or "attention rollout".
        target: the class or label the class map explains (empty: the predicted one).
        token: for attention rollout: the token it starts from: 0 to P-1 a patch (row by row), -1 CLS, -2... registers.
        labels: for CLIP or SigLIP: the classes in words, comma-separated (empty: ten everyday ones).
        template: for CLIP or SigLIP: the prompt each label is written into, one {} (empty: "a photo of a {}.").
    Returns:
        A picture: the map over the image, with its colour bar and title. JSON: "values", the map's number for
        each patch as rows of the patch grid (higher: more relevant; occlusion: how much hiding the patch lowers
        the class's probability, below 0 where it raises it); "most_relevant_patches" (patch numbers, row by row
        from the top left); "explains" (the class the map is for); "predicted".
    """
    method = choice(method, "The method", EXPLAIN_METHODS, default="gradient rollout")
    class_map = method if method in CLASS_MAPS else CLASS_MAPS[0]  # the view's class map (rollout: its default)
    with SLOTS.taken():
        view, _, ex, v = explore_view(
            image,
            model,
            target=target or PREDICTED,
            patch=token,
            method=class_map,
            labels=labels or None,
            template=template or None,
        )
        m = resolve_model(model, v)
        m = in_words(m, labels or None, template or None)
        if method != ROLLOUT and not ex.has_head:
            raise gr.Error(_no_classifier(m.card.title, "explains no class"))
        o = explore_pictures.Options(token=selected_token(token, m.layout), method=class_map)
        values = explore_pictures.drawn_values(m, ex, o)["class_map" if method != ROLLOUT else "rollout"]
        picture = view.class_map if method != ROLLOUT else view.rollout
        about = METHODS[method].about.replace("{reader}", m.layout.reader)
        numbers = {
            "model": m.card.title,
            "method": method,
            "about": about,
            "values": _grid(values, m.layout.grid),
            "most_relevant_patches": _top(values),
        }
        if ex.has_head:
            classes = m.card.classes
            numbers["predicted"] = classes[int(ex.probs.argmax())]
            numbers["explains"] = classes[ex.target] if method != ROLLOUT else None
        if method == ROLLOUT:
            numbers["from_token"] = o.token.name
        return picture, _numbers(numbers)


def attention(
    image: ImagePayload, model: str = "cifar10", layer: float = 0, head: float = 1, token: float = -1
) -> tuple[np.ndarray, str]:
    """The attention one head of one layer gives from a token to every patch of an image.

    Args:
        image: the image, as a URL or an upload.
        model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>".
        layer: the layer, 1 to the model's depth (0: the last).
        head: the head, 1 to the model's number of heads.
        token: the token attending: 0 to P-1 a patch (row by row from the top left), -1 CLS, -2... registers.
    Returns:
        A picture: the attention weights over the image, with their colour bar. JSON: "weights", each patch's
        attention weight as rows of the patch grid (the token's weights over every token sum to 1);
        "to_tokens_before_the_patches", the weight on CLS and any registers; "layer", "head", "from_token".
    """
    with SLOTS.taken():
        v = visitor(None)
        m = resolve_model(model, v)
        cfg = m.card.config
        layer_n, layer_note = layer_index(layer or cfg.depth, "The layer", cfg.depth, default=cfg.depth)
        head_n, head_note = layer_index(head, "The head", cfg.num_heads, default=1)
        view, _, ex, v = explore_view(image, model, layer=layer_n, head=head_n, patch=token, state=v)
        o = explore_pictures.Options(layer=layer_n, head=head_n, token=selected_token(token, m.layout))
        values = explore_pictures.drawn_values(m, ex, o)
        numbers = {
            "model": m.card.title,
            "layer": layer_n,
            "head": head_n,
            "from_token": o.token.name,
            "weights": _grid(values["head_large"], m.layout.grid),
            "most_attended_patches": _top(values["head_large"]),
        }
        if "head_to_prefix" in values:
            numbers["to_tokens_before_the_patches"] = dict(
                zip(m.layout.prefix, (float(f"{w:.6g}") for w in values["head_to_prefix"].tolist()))
            )
        notes = " ".join(n for n in (layer_note, head_note) if n)
        if notes:
            numbers["note"] = notes
        return view.head_large, _numbers(numbers)


def step_by_step(
    image: ImagePayload, model: str = "cifar10", stage: str = "block", block: float = 1, token: float = -1
) -> tuple[np.ndarray, str]:
    """One image through the network stage by stage, with the real tensors: the patches, the token sequence,
    the patch embedding, the position embeddings, a transformer block, the head, the prediction after each block.

    Args:
        image: the image, as a URL or an upload.
        model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>".
        stage: the stage whose picture comes back: input, sequence, embedding, positions, block, head or lens.
        block: the block the "block" stage shows, 1 to the model's depth.
        token: the token the stages follow: 0 to P-1 a patch, -1 CLS, -2... registers.
    Returns:
        A picture of the stage asked for. JSON: "stages", each stage's sentence saying what its picture shows,
        with the shapes and numbers of the real tensors.
    """
    stage = choice(stage, "The stage", STAGE_NAMES, default="block")
    with SLOTS.taken():
        view, _, _ = step_view(image, model, block, token)
        sentences = {name: getattr(view, f"{name}_text") for name in STAGE_NAMES}
        return getattr(view, stage), _numbers({"stage": stage, "stages": sentences})


def take_patches_away(
    image: ImagePayload,
    model: str = "cifar10",
    method: str = "LeGrad",
    k: float = 10,
    labels: str = "",
    template: str = "",
) -> tuple[np.ndarray, np.ndarray, str]:
    """Hide the k patches a map ranks most relevant and see the prediction change; every map's deletion curve.

    Args:
        image: the image, as a URL or an upload.
        model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>" (a model with a classifier).
        method: the ranking: gradient rollout, LeGrad, occlusion, attention rollout, last-layer attention, random order.
        k: how many patches to hide (0 to the number of patches).
        labels: for CLIP or SigLIP: the classes in words, comma-separated.
        template: for CLIP or SigLIP: the prompt each label is written into, one {}.
    Returns:
        A picture of the image with those patches in the data set's mean colour, and a picture of every map's
        deletion curve. JSON: "top5_without_them"; "class" (the class predicted on the whole image) and its
        "probability"; "deletion_curves", the class's probability as each map's patches go, most relevant first,
        at 0, 1/16, ..., all of them; "deletion_auc", the area under each curve (lower: the map found what the
        model uses; compare it with "random order").
    """
    with SLOTS.taken():
        rv, v = removal_tab.view(image, model, method, k, labels or None, template or None)
        m, study, why = removal_tab.study_for(image, model, v, (labels or None, template or None))
        numbers = {
            "model": m.card.title,
            "hidden_patches": sorted(rv.hidden),
            "top5_without_them": rv.top5,
            "class": m.card.classes[study.target],
            "probability": float(f"{study.prob:.6g}"),
            "deletion_curves": {name: [float(f"{p:.6g}") for p in c.tolist()] for name, c in study.curves.items()},
            "deletion_auc": {name: float(f"{float(a):.6g}") for name, a in study.auc.items()},
        }
        if why:
            numbers["note"] = why
        return rv.picture, rv.curves, _numbers(numbers)


def compare_models(
    image: ImagePayload,
    model_a: str = "cifar10",
    model_b: str = "cifar10/random-head",
    method: str = "gradient rollout",
    target: str = "",
) -> tuple[np.ndarray, np.ndarray, str]:
    """Two models side by side on one image: each one's class map and prediction.

    Args:
        image: the image, as a URL or an upload.
        model_a: the first model: a key from list_models, "timm/<name>" or "hf:<org>/<repo>".
        model_b: the second model.
        method: the class map: "gradient rollout", "LeGrad" or "occlusion".
        target: the class both maps explain (empty: each its predicted class; a model without it explains its own).
    Returns:
        Model A's class map and model B's, each titled with its model. JSON: "a" and "b", each model's "top5"
        and a "note" (empty, or why its map is not the one asked for).
    """
    with SLOTS.taken():
        reply = compare_tab.compare(image, model_a, model_b, method=method, target=target or PREDICTED)
    out = dict(zip(compare_tab.API.names, reply))
    numbers = {
        side: {"model": key, "top5": out[f"top5_{side}"], "note": out[f"note_{side}"].removeprefix("⚠️ ")}
        for side, key in (("a", model_a), ("b", model_b))
    }
    return out["class_map_a"], out["class_map_b"], _numbers(numbers)


TOOLS: dict[str, tuple[Callable, int]] = {  # name -> (function, how many pictures it answers)
    "list_models": (list_models, 0),
    "predict": (predict, 0),
    "explain": (explain, 1),
    "attention": (attention, 1),
    "step_by_step": (step_by_step, 1),
    "take_patches_away": (take_patches_away, 2),
    "compare_models": (compare_models, 2),
}


def wire() -> None:
    """Each tool as a public endpoint, /tool_<name>, on hidden components of the page being built. Wired before the
    page's own endpoints, so that the tools have their plain names (Gradio names a tool after its function, and
    numbers a second of one name); the page's endpoints stay in the API but are no tools
    (gradio_internals.tools_only)."""
    with gr.Column(visible=False):
        for name, (fn, pictures) in TOOLS.items():
            inputs = [_component(p.annotation, p.default) for p in inspect.signature(fn).parameters.values()]
            outputs = [gr.Image(format="png") for _ in range(pictures)] + [gr.Textbox()]
            about = describe(fn)
            gr.Button().click(
                fn, inputs, outputs, preprocess=False, queue=False, api_name=f"tool_{name}", api_description=about
            )


def describe(fn: Callable) -> str:
    """A tool's description for an agent: its docstring's opening, then what it returns (the docstring's
    "Returns:" part), each as one paragraph; the parameters' own lines are Gradio's to read."""
    doc = inspect.getdoc(fn) or ""
    opening = doc.split("Args:")[0].split("Returns:")[0]
    returns = doc.split("Returns:")[1] if "Returns:" in doc else ""
    flat = " ".join(opening.split())
    return flat + (" Returns: " + " ".join(returns.split()) if returns else "")


def _component(annotation: object, default: object) -> gr.components.Component:
    """The hidden input a parameter of a tool reads (its API type): an image, a number, or a text."""
    if annotation in ("ImagePayload", ImagePayload):
        return gr.Image()
    if annotation in ("float", float):
        return gr.Number(default)
    return gr.Textbox(default)
