"""The `transformers` family: every class vitviz reads, loaded through the real `from_pretrained` path from a Hugging
Face cache the tests write (random weights, HF_HUB_OFFLINE), checked against transformers' own forward."""

import numpy as np
import pytest
import torch
from helpers import use_hub_cache
from hf_cache import REPOS, write_cache
from PIL import Image

import vitviz
from vitviz.explain import interpret, methods
from vitviz.models.bound import ModelError, TooLarge
from vitviz.models.loaded import Adapter

KINDS = {  # repo -> (the prefix tokens, the row the prediction reads)
    "test/vit": (("CLS",), "CLS"),
    "test/deit": (("CLS", "distillation"), "CLS"),
    "test/deit-distilled": (("CLS", "distillation"), "CLS and distillation"),
    "test/dinov2": (("CLS",), "CLS"),
    "test/dinov2-reg": (("CLS", "register 1", "register 2", "register 3", "register 4"), "CLS"),
    "test/dinov3": (("CLS", "register 1", "register 2", "register 3", "register 4"), "CLS"),
    "test/clip": (("CLS",), "CLS"),
    "test/siglip": ((), "pooling query"),
    "test/siglip2": ((), "pooling query"),
}
BACKBONES = ("test/dinov2", "test/dinov2-reg", "test/dinov3")


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    return write_cache(tmp_path_factory.mktemp("hub"), REPOS)


@pytest.fixture
def offline(hub_cache, monkeypatch):
    use_hub_cache(monkeypatch, hub_cache)
    return hub_cache


def reference(repo: str):
    """The same checkpoint as transformers itself loads it, with its own eager attention (another instance)."""
    import transformers as T

    arch = T.AutoConfig.from_pretrained(repo).architectures[0]
    return getattr(T, arch).from_pretrained(repo, attn_implementation="eager").eval()


def photo(seed: int = 0, shape=(45, 38)) -> Image.Image:
    return Image.fromarray((np.random.RandomState(seed).rand(*shape, 3) * 255).astype("uint8"))


def naflex(x: torch.Tensor, patch: int) -> dict:
    """SigLIP 2 NaFlex's inputs for square images, patched by its own processor's function."""
    from transformers.models.siglip2.image_processing_siglip2 import convert_image_to_patches

    g = x.shape[-1] // patch
    return {
        "pixel_values": torch.stack([convert_image_to_patches(im, patch) for im in x]),
        "pixel_attention_mask": torch.ones(len(x), g * g, dtype=torch.long),
        "spatial_shapes": torch.tensor([[g, g]] * len(x)),
    }


def their_outputs(ref, v, x: torch.Tensor):
    """(the scores, per-layer attention) of transformers' own forward; for CLIP and SigLIP the labels' text goes
    through the processor's tokenizer, as its documentation does it."""
    if hasattr(ref, "get_text_features"):
        import transformers as T

        siglip = "Siglip" in type(ref).__name__
        tok = T.AutoTokenizer.from_pretrained(ref.name_or_path)
        text = tok(
            [v.card.template.format(t) for t in v.card.classes],
            padding="max_length" if siglip else True,
            return_tensors="pt",
        )
        if siglip:
            text.pop("attention_mask")
        pixels = naflex(x, v.layout.patch_size) if "Siglip2" in type(ref).__name__ else {"pixel_values": x}
        out = ref(**pixels, **text, output_attentions=True)
        return out.logits_per_image, out.vision_model_output.attentions
    out = ref(pixel_values=x, output_attentions=True)
    scores = getattr(out, "logits", None)
    return (out.pooler_output if scores is None else scores), out.attentions


@pytest.mark.parametrize("repo", list(KINDS))
def test_each_class_equals_transformers_own_forward(offline, repo):
    v = vitviz.load_model(f"hf:{repo}")
    ref = reference(repo)
    assert v.card.kind == "transformers" and v.layout.prefix == KINDS[repo][0] and v.layout.reader == KINDS[repo][1]
    assert isinstance(v.adapter, Adapter)
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    out = v.forward_intermediates(x)
    with torch.no_grad():
        scores, attn = their_outputs(ref, v, x)
    torch.testing.assert_close(out["logits"], scores, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v(x), scores, atol=1e-5, rtol=1e-5)  # the plain (SDPA) pass too
    assert len(out["attn"]) == len(attn) == 2
    for mine, theirs in zip(out["attn"], attn):
        assert torch.equal(mine, theirs)  # bit for bit: the same eager softmax
    assert out["attn"][0].shape[-1] == v.layout.num_tokens == len(KINDS[repo][0]) + 16


@pytest.mark.parametrize("repo", ["test/vit", "test/deit", "test/dinov2", "test/dinov3", "test/clip", "test/siglip"])
def test_preprocess_is_the_image_processors(offline, repo):
    import transformers as T

    v = vitviz.load_model(f"hf:{repo}")
    for shape in ((45, 38), (38, 45), (33, 33), (120, 64)):
        image = photo(shape[0], shape)
        mine = vitviz.preprocess(image, v)
        for backend in ("pil", "torchvision"):
            proc = T.AutoImageProcessor.from_pretrained(repo, backend=backend)
            theirs = proc(images=image, return_tensors="pt")["pixel_values"]
            assert mine.shape == theirs.shape == (1, 3, 32, 32)
            exact = type(proc).__name__.endswith("Pil")  # DINOv3's processor has the torchvision backend only
            # the PIL processor resizes as vitviz does: equal; torchvision's resize differs by a grey level at most
            most = 1e-5 if exact else 1.01 / 255 / min(v.card.std)
            assert (mine - theirs).abs().max() <= most, (backend, type(proc).__name__)


@pytest.mark.parametrize("repo", list(KINDS))
def test_every_readme_function_runs_and_leaves_the_module_as_it_was(offline, repo):
    v = vitviz.load_model(f"hf:{repo}")
    module = v.module
    before = {k: t.clone() for k, t in module.state_dict().items()}
    impl = module.config._attn_implementation
    x = vitviz.preprocess(photo(), v)
    attn = interpret.attention_maps(v, x)
    assert attn.shape[1:3] == (2, 4)
    interpret.attention_rollout(attn)
    interpret.mean_attention_distance(attn, 8, prefix=v)
    interpret.patch_attention(attn, 3, prefix=v.layout)
    norms = interpret.token_norms(v, x)
    interpret.norm_outliers(norms[0], prefix=v)
    interpret.patch_embed_components(v)
    interpret.walk(v, x)
    sim = interpret.pos_embed_similarity(v)
    assert (sim is None) == (repo == "test/dinov3")  # rotary positions: no embedding per position
    for method in methods.METHODS:
        if methods.METHODS[method].class_specific and repo in BACKBONES:
            with pytest.raises(ValueError, match="no classifier"):
                methods.relevance(v, x, method)
        else:
            m = methods.relevance(v, x, method)
            assert m.shape == (1, 16) and torch.isfinite(m).all()
    if repo in BACKBONES:
        for fn in (interpret.gradient_rollout, interpret.legrad, interpret.logit_lens):
            with pytest.raises(ValueError, match="no classifier"):
                fn(v, x)
    else:
        lens = interpret.logit_lens(v, x)
        assert lens.shape == (1, 2, len(v.card.classes))
        torch.testing.assert_close(lens[0, -1], v.probabilities(v(x))[0], atol=1e-5, rtol=1e-4)
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert module.config._attn_implementation == impl and not module.training
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


def test_siglip2_naflex_is_read_at_its_square_size(offline):
    """The processor keeps an image's aspect (any grid up to its patch budget); vitviz runs the square grid: on a
    square image the two agree to a grey level, patch for patch."""
    import transformers as T

    v = vitviz.load_model("hf:test/siglip2")
    assert v.card.config.image_size == 32 and v.layout.grid == (4, 4) and v.card.prepare[0] == "exact"
    image = photo(5, (40, 40))
    theirs = T.AutoImageProcessor.from_pretrained("test/siglip2")(images=image, return_tensors="pt")
    mine = naflex(vitviz.preprocess(image, v), 8)
    assert torch.equal(theirs["spatial_shapes"], mine["spatial_shapes"])
    assert (theirs["pixel_values"] - mine["pixel_values"]).abs().max() <= 1.01 / 255 / 0.5


def test_other_instances_keep_their_attention(offline):
    import transformers as T

    vitviz.load_model("hf:test/vit")
    other = T.ViTForImageClassification.from_pretrained("test/vit")
    assert other.config._attn_implementation == "sdpa"


def test_functions_on_attention_alone_ask_for_the_layout(offline):
    v = vitviz.load_model("hf:test/dinov2-reg")
    attn = interpret.attention_maps(v, torch.randn(1, 3, 32, 32))
    with pytest.raises(TypeError):
        interpret.patch_attention(attn, 3)
    with pytest.raises(TypeError):
        interpret.mean_attention_distance(attn, 8)
    # with the layout, patch 3's row is the fifth token past the registers' (CLS + 4 registers)
    assert torch.equal(interpret.patch_attention(attn, 3, prefix=v), attn[..., 5 + 3, 5:])


def test_a_distilled_deits_gradient_rollout_reads_both_of_its_heads_tokens(offline):
    """Chefer et al.'s rule by hand on the model's own attention, then the mean of the CLS and distillation
    rows: the two tokens the prediction averages."""
    v = vitviz.load_model("hf:test/deit-distilled")
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    logits, attns = interpret.forward_with_attention(v, x, grad=True)
    t = int(logits.argmax())
    grads = torch.autograd.grad(logits[0, t], attns)
    R = torch.eye(18)
    for a, g in zip(attns, grads):
        R = R + (g * a).clamp(min=0).mean(1)[0] @ R
    expected = (R[0, 2:] + R[1, 2:]) / 2
    torch.testing.assert_close(interpret.gradient_rollout(v, x)[0], expected.detach(), atol=1e-6, rtol=1e-5)


def test_what_cannot_be_read_or_had_gets_a_sentence(offline, tmp_path):
    with pytest.raises(ModelError, match="not one vitviz can read.*CLIPModel"):
        vitviz.load_model("hf:test/resnet")
    with pytest.raises(ModelError, match="Dinov2ForImageClassification, not one vitviz can read"):
        vitviz.load_model("hf:test/dinov2-classifier")
    with pytest.raises(ModelError, match="not on this machine and cannot be downloaded now"):
        vitviz.load_model("hf:someone/not-in-the-cache")
    with pytest.raises(ModelError, match="not a Hub id"):
        vitviz.load_model("hf:../../etc/passwd")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        vitviz.load_model(f"hf:{tmp_path / 'empty'}")


def test_a_folder_save_pretrained_wrote_loads(tmp_path):
    from hf_cache import save

    folder = save(tmp_path / "my-vit", "vit", seed=4)
    v = vitviz.load_model(f"hf:{folder}")
    assert v.card.classes == ("cat", "dog", "car") and v.card.name.startswith("my-vit")


def test_the_size_bound_holds_before_the_weights_are_read(offline, hub_cache):
    # the weights file goes: a model over the bound is refused from its config alone
    snapshot = next((hub_cache / "models--test--clip" / "snapshots").iterdir())
    weights = snapshot / "model.safetensors"
    kept = weights.read_bytes()
    weights.unlink()
    try:
        with pytest.raises(TooLarge, match="parameters"):
            vitviz.load_model("hf:test/clip", max_params=10_000)
        with pytest.raises(ModelError, match="not on this machine"):
            vitviz.load_model("hf:test/clip", max_params=None)
    finally:
        weights.write_bytes(kept)
