"""Labels in words for CLIP and SigLIP: zero-shot scores by each model's own rule, LeGrad for a label by the paper's
definition, the labels through /explain with many visitors at once, in the link, and in the menu. The models are
tiny random ones in a Hugging Face cache the tests write (no hub is reached)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from helpers import use_hub_cache
from hf_cache import REPOS, write_cache
from PIL import Image

import vitviz
from vitviz.explain import interpret
from vitviz.models.words import with_labels

LABELS = ("cat", "dog", "red car", "a small bird")


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    wanted = {k: v for k, v in REPOS.items() if v in ("clip", "siglip", "vit")}
    return write_cache(tmp_path_factory.mktemp("hub"), wanted)


@pytest.fixture
def offline(hub_cache, monkeypatch):
    use_hub_cache(monkeypatch, hub_cache)
    return hub_cache


def photo(seed=0, shape=(40, 36)) -> Image.Image:
    return Image.fromarray((np.random.RandomState(seed).rand(*shape, 3) * 255).astype("uint8"))


def their_model(repo):
    import transformers as T

    return T.AutoModel.from_pretrained(repo, attn_implementation="eager").eval()


def their_text(repo, labels, template="a photo of a {}."):
    """The labels' token ids as the model's documentation tokenizes them (SigLIP: padded to its full length)."""
    import transformers as T

    siglip = "siglip" in repo
    tok = T.AutoTokenizer.from_pretrained(repo)
    out = tok([template.format(t) for t in labels], padding="max_length" if siglip else True, return_tensors="pt")
    return {k: v for k, v in out.items() if not (siglip and k == "attention_mask")}


@pytest.mark.parametrize("repo", ["test/clip", "test/siglip"])
def test_zero_shot_scores_are_transformers_by_each_models_rule(offline, repo):
    import transformers as T

    v = vitviz.load_model(f"hf:{repo}")
    image = photo(1)
    got = vitviz.zero_shot(image, v, ", ".join(LABELS))
    assert tuple(got) == LABELS
    pixels = T.AutoImageProcessor.from_pretrained(repo, backend="pil")(images=image, return_tensors="pt")
    with torch.no_grad():
        logits = their_model(repo)(**pixels, **their_text(repo, LABELS)).logits_per_image[0]
    expected = logits.sigmoid() if "siglip" in repo else logits.softmax(-1)  # SigLIP: each its own sigmoid
    torch.testing.assert_close(torch.tensor(list(got.values())), expected, atol=1e-5, rtol=1e-4)
    if "siglip" in repo:
        assert abs(sum(got.values()) - 1) > 1e-3  # never renormalised
    # another template changes the text, so the scores
    assert vitviz.zero_shot(image, v, LABELS, "a drawing of {}") != got


def _text_embeds(ref, repo, labels):
    with torch.no_grad():
        t = ref.get_text_features(**their_text(repo, labels))
    t = getattr(t, "pooler_output", t)
    return t / t.norm(dim=-1, keepdim=True)


def _minmax(m):
    lo, hi = m.amin(1, keepdim=True), m.amax(1, keepdim=True)
    return (m - lo) / (hi - lo)


def legrad_clip(ref, repo, x, label):
    """LeGrad (Bousselham et al., 2024) for CLIP, from its definition: each layer's CLS token through the final
    norm and projection, its cosine with the label's text embedding; the positive part of that score's
    gradient with respect to the layer's attention, averaged over heads and queries; summed over layers; min-max."""
    t = _text_embeds(ref, repo, LABELS)[label]
    out = ref.vision_model(pixel_values=x, output_attentions=True, output_hidden_states=True)
    total = 0
    for layer, a in enumerate(out.attentions):
        e = ref.visual_projection(ref.vision_model.post_layernorm(out.hidden_states[layer + 1][:, 0]))
        s = (e / e.norm(dim=-1, keepdim=True) @ t).sum()
        g = torch.autograd.grad(s, a, retain_graph=True)[0]
        total = total + g.clamp(min=0).mean(dim=(1, 2))[:, 1:]
    return _minmax(total)


def legrad_siglip(ref, repo, x, label):
    """LeGrad for SigLIP, from its definition: each layer's tokens through the final norm and the attention-pooling
    head (written out here with einsum from its weights), the pooled embedding's cosine with the label's; the
    positive part of its gradient with respect to the pooling head's attention, averaged over heads; summed over
    layers; min-max."""
    t = _text_embeds(ref, repo, LABELS)[label]
    vision = ref.vision_model
    head, mha = vision.head, vision.head.attention
    out = vision(pixel_values=x, output_hidden_states=True)
    D, H = mha.embed_dim, mha.num_heads
    Wq, Wk, Wv = mha.in_proj_weight.split(D)
    bq, bk, bv = mha.in_proj_bias.split(D)
    total, pooled = 0, None
    for hidden in out.hidden_states[1:]:
        n = vision.post_layernorm(hidden)
        q = torch.einsum("d,ed->e", head.probe[0, 0], Wq) + bq
        k = torch.einsum("bnd,ed->bne", n, Wk) + bk
        val = torch.einsum("bnd,ed->bne", n, Wv) + bv
        qh, kh, vh = q.view(H, D // H), k.unflatten(-1, (H, D // H)), val.unflatten(-1, (H, D // H))
        a = (torch.einsum("hc,bnhc->bhn", qh, kh) / (D // H) ** 0.5).softmax(-1)  # (B, H, N)
        o = mha.out_proj(torch.einsum("bhn,bnhc->bhc", a, vh).flatten(1))
        pooled = o + head.mlp(head.layernorm(o))
        s = (pooled / pooled.norm(dim=-1, keepdim=True) @ t).sum()
        total = total + torch.autograd.grad(s, a, retain_graph=True)[0].clamp(min=0).mean(1)
    torch.testing.assert_close(pooled, out.pooler_output, atol=1e-5, rtol=1e-5)  # the head written out is the head
    return _minmax(total)


@pytest.mark.parametrize("repo", ["test/clip", "test/siglip"])
def test_legrad_for_a_label_is_the_papers(offline, repo):
    v = with_labels(vitviz.load_model(f"hf:{repo}"), LABELS)
    ref = their_model(repo)
    x = vitviz.preprocess(photo(2), v)
    for label in range(len(LABELS)):
        mine = interpret.legrad(v, x, label)
        theirs = (legrad_siglip if "siglip" in repo else legrad_clip)(ref, repo, x, label).detach()
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)


def test_with_labels_is_one_record_per_word_list_and_refuses_bad_lists(offline, monkeypatch):
    v = vitviz.load_model("hf:test/clip")
    assert with_labels(v, "cat, dog") is with_labels(v, ["cat", "dog"])  # the same words: the same record
    assert with_labels(v, "cat, dog").card.classes == ("cat", "dog")
    many = ",".join(str(i) for i in range(60))
    for bad, why in ((" , ,", "at least one"), (many, "At most"), ("x" * 80, "characters")):
        with pytest.raises(ValueError, match=why):
            with_labels(v, bad)
    for template in ("no slot here", "a {} and {}", "a {0} of {}"):
        with pytest.raises(ValueError, match="exactly one"):
            with_labels(v, "cat", template)
    assert with_labels(v, "a {curly} label").card.classes == ("a {curly} label",)  # a label is text, not a format
    monkeypatch.setenv("VITVIZ_MAX_LABELS", "3")
    with pytest.raises(ValueError, match="At most 3 labels"):
        with_labels(v, "a, b, c, d")
    with pytest.raises(ValueError, match="fixed classes"):
        with_labels(vitviz.load_model("hf:test/vit"), "cat")


@pytest.fixture
def served_models(offline, monkeypatch):
    from vitviz.app import menu

    monkeypatch.setattr(menu, "MODELS", menu.SharedModels())
    return menu


def test_explain_with_labels_from_eight_threads_equals_each_alone(served_models, tmp_path):
    from helpers import canonical

    from vitviz.app.tabs import explore

    path = tmp_path / "photo.png"
    photo(3, (64, 48)).save(path)
    image = {"path": str(path)}
    lists = ["cat, dog", "red car, bird, frog", "dog, cat", "ship", "cat, dog, red car", "horse, deer", "a, b", "car"]
    jobs = [
        (lists[i], "hf:test/clip" if i % 2 else "hf:test/siglip", ("gradient rollout", "LeGrad", "occlusion")[i % 3])
        for i in range(8)
    ]

    def call(labels, key, method):
        target = labels.split(",")[-1].strip()
        return canonical(explore.explain(image, key, method=method, labels=labels, target=target))

    alone = [call(*job) for job in jobs]
    start = threading.Barrier(8)

    def together(job):
        start.wait(timeout=60)
        return call(*job)

    with ThreadPoolExecutor(8) as pool:
        at_once = list(pool.map(together, jobs))
    for job, a, b in zip(jobs, alone, at_once):
        assert a == b, job
    assert alone[0] != alone[2]  # the labels' order is the prediction box's: the replies differ


def test_explain_says_what_is_wrong_with_the_labels(served_models):
    from vitviz.app.inputs import FieldError
    from vitviz.app.tabs import explore

    with pytest.raises(FieldError, match="at least one label"):
        explore.explain({"path": "x.png"}, "hf:test/clip", labels=" , ")


def test_the_menu_takes_a_hub_id_and_says_where_its_entries_are(served_models):
    menu = served_models
    assert menu.typed_key("google/vit-base-patch16-224") == "hf:google/vit-base-patch16-224"
    assert menu.typed_key("deit_tiny_patch16_224.fb_in1k") == "timm/deit_tiny_patch16_224.fb_in1k"
    assert menu.resolve_model("test/clip").zero_shot
    labels = dict((k, lbl) for lbl, k in menu.model_choices())
    for key in ("hf:openai/clip-vit-base-patch16", "hf:google/siglip2-base-patch16-224"):
        assert "needs internet" in labels[key] and "MB once" in labels[key]  # not in this test's cache


def test_the_link_carries_the_labels_of_a_model_in_words(served_models):
    from urllib.parse import parse_qs

    from vitviz.app import link

    ask = ("predicted class", "LeGrad", 2, 1, -1, "mean", 0.0, None, None, "cat, red car", "a photo of a {}.")
    q = parse_qs(link.view_query("hf:test/clip", *ask)["value"][1:])
    assert q["labels"] == ["cat, red car"] and q["template"] == ["a photo of a {}."]
    q = parse_qs(link.view_query("cifar10", *ask)["value"][1:])
    assert "labels" not in q  # a model with fixed classes: no words in its link
    assert link.READ["labels"]("chat, chien, 猫") == "chat, chien, 猫"
    assert link.READ["labels"]("x\n" * 5) is None


def test_a_siglip_page_names_its_pooling_query_and_never_a_cls(served_models, tmp_path):
    from vitviz.app import switch
    from vitviz.app.state import Visitor
    from vitviz.app.tabs import explore

    v = Visitor()
    changed = dict(zip(switch.CHANGED.names, switch.controls_for("hf:test/siglip", v, labels="cat, dog")))
    assert changed["labels"]["visible"] and changed["target"]["label"] == "Explain label"
    assert changed["to_cls"]["value"] == "Back to the pooling query"
    assert "-1 the pooling query" in changed["patch"]["label"]
    assert "sigmoid" in changed["top5"]["label"]
    from vitviz.app.tabs import steps as steps_tab

    assert (
        "sigmoid" in steps_tab.fitted("hf:test/siglip", v)[2]
        and "softmax" not in steps_tab.fitted("hf:test/siglip", v)[2]
    )
    path = tmp_path / "photo.png"
    photo(6, (50, 40)).save(path)
    view, _, ex, v = explore.explore_view({"path": str(path)}, "hf:test/siglip", labels="cat, dog", state=v)
    assert "pooling query" in view.summary and "CLS" not in view.summary
    assert ex.pool is not None and ex.pool.shape == (4, 16) and ex.prefix == 0
    # the selected pooling query's rollout is its pooling head's attention (heads averaged) times the rollout
    rolled = interpret.attention_rollout(ex.attn[None])[0]
    from vitviz.pictures.explore import Options, _Drawer

    d = _Drawer(explore.resolve_model("hf:test/siglip", v), ex, Options())
    torch.testing.assert_close(d._token_row(rolled), ex.pool.mean(0) @ rolled)
    assert d.who == "the pooling query"


def test_compare_puts_clip_beside_a_classifier_and_predict_scores_the_labels(served_models, tmp_path):
    from vitviz.app.tabs import compare, explore

    path = tmp_path / "photo.png"
    photo(7, (48, 48)).save(path)
    image = {"path": str(path)}
    out = dict(
        zip(compare.API.names, compare.compare(image, "hf:test/clip", "hf:test/vit", target="dog", labels="cat, dog"))
    )
    assert out["note_a"] == "" and out["note_b"] == ""  # both know 'dog': a label on one side, a class on the other
    assert set(out["top5_a"]) == {"cat", "dog"} and "car" in out["top5_b"]
    scores = explore.predict(image, "hf:test/clip", labels="cat, dog, red car")
    assert set(scores) == {"cat", "dog", "red car"} and abs(sum(scores.values()) - 1) < 1e-5


def test_a_folder_without_its_image_processor_is_told_what_to_save(tmp_path):
    from hf_cache import tiny

    from vitviz.models.bound import ModelError

    tiny("vit").save_pretrained(tmp_path / "bare")
    with pytest.raises(ModelError, match="processor.save_pretrained"):
        vitviz.load_model(f"hf:{tmp_path / 'bare'}")
