import io
import zipfile

import numpy as np
import pytest
import torch
from helpers import make_zip
from PIL import Image

from vitviz import preprocess
from vitviz.data import datasets as D
from vitviz.data import images as I
from vitviz.models.hub import loaded


def test_load_zip_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("VITVIZ_CACHE", str(tmp_path / "cache"))
    z = make_zip(tmp_path / "cifar10-jpeg.zip")
    ds = D.load_dataset("cifar10", tmp_path, val_size=5)  # a folder holding the zip
    assert ds.train.x.dtype == torch.uint8 and ds.train.x.shape[1:] == (3, 32, 32)
    # a small data set keeps 90% for training: 3 of 30 are held out, not 5
    assert len(ds.train) + len(ds.val) == 30 and len(ds.test) == 30 and len(ds.val) == 3
    # the label matches the folder: red channel encodes the class index
    assert torch.equal(ds.test.x[:, 0, 0, 0].long() // 20, ds.test.y)
    ds2 = D.load_dataset("cifar10", z, val_size=5)  # the zip itself, now from the cache
    assert torch.equal(ds.train.x, ds2.train.x)


def test_env_variable_and_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("VITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("VITVIZ_DATA", str(tmp_path / "nothing-here"))
    with pytest.raises(D.DataUnavailable):
        D.load_dataset("mnist")
    folder = tmp_path / "mnist"
    for split in ("train", "test"):
        (folder / split / "7").mkdir(parents=True)
        Image.new("L", (28, 28), 200).save(folder / split / "7" / "1.png")
    monkeypatch.setenv("VITVIZ_DATA", str(folder))
    ds = D.load_dataset("mnist", val_size=0)
    assert ds.train.x.shape == (1, 1, 28, 28) and ds.train.y.tolist() == [7]


def test_augment_is_crop_and_flip():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 255, (64, 3, 32, 32), dtype=torch.uint8)
    y = D.augment(x, flip=True, pad=4, generator=g)
    assert y.shape == x.shape and y.dtype == torch.uint8
    # each output is a shifted (possibly flipped) window of the zero-padded input
    xp = torch.nn.functional.pad(x, (4, 4, 4, 4))
    for i in range(8):
        found = any(
            torch.equal(y[i], cand)
            for dy in range(9)
            for dx in range(9)
            for cand in (xp[i, :, dy : dy + 32, dx : dx + 32], xp[i, :, dy : dy + 32, dx : dx + 32].flip(2))
        )
        assert found
    assert not torch.equal(y, x)
    assert torch.equal(D.augment(x, flip=False, pad=0), x)


def test_shared_data_layout(shared_data):
    with zipfile.ZipFile(shared_data / "cifar10-jpeg.zip") as z:
        names = [n for n in z.namelist() if n.startswith("test/cat/")]
    assert len(names) > 900


def _model():
    from vitviz import ViT, describe, make_config

    return describe(ViT(make_config("tiny", embed_dim=32, depth=1)), dataset="cifar10")


Model = loaded(_model())


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "CMYK", "I;16", "I", "F", "1", "YCbCr"])
def test_preprocess_any_mode(mode):
    im = Image.new("RGB", (50, 37), (200, 30, 60)).convert(mode)
    x = preprocess(im, Model)
    assert x.shape == (1, 3, 32, 32) and x.dtype == torch.float32 and torch.isfinite(x).all()


def test_preprocess_16bit_scaled():
    im = Image.fromarray(np.full((40, 40), 65535, dtype=np.uint16))
    px = I.to_pixels(im, 32, 3)
    assert px.min() == 255


def test_exif_orientation_applied():
    im = Image.new("RGB", (64, 32), (0, 0, 0))
    im.paste((255, 255, 255), (0, 0, 32, 32))  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW on display
    buf = io.BytesIO()
    im.save(buf, format="JPEG", exif=exif)
    px = I.to_pixels(I.open_image(buf.getvalue()), 32, 3)
    # displayed upright the photo is 32 wide and 64 tall, its white half on top
    assert px.shape == (32, 32, 3)
    assert px[:8].mean() > 200 and px[-8:].mean() < 50


def test_bad_images():
    with pytest.raises(ValueError):
        I.open_image(b"not an image at all")
    with pytest.raises(ValueError):
        I.to_pixels("nope", 32, 3)
    one = I.to_pixels(Image.new("RGB", (1, 1), (10, 20, 30)), 32, 3)
    assert one.shape == (32, 32, 3) and (one == [10, 20, 30]).all()


def test_animated_first_frame():
    frames = [Image.new("RGB", (20, 20), c) for c in [(255, 0, 0), (0, 255, 0)]]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    im = I.open_image(buf.getvalue())
    px = I.to_pixels(im, 32, 3)
    assert px[..., 0].mean() > 200 and px[..., 1].mean() < 50


def test_mnist_inverts_dark_on_light():
    im = Image.new("L", (28, 28), 255)
    im.paste(0, (10, 4, 16, 24))
    px = I.to_pixels(im, 28, 1, invert_light=True)
    assert px[0, 0, 0] == 0 and px[14, 13, 0] == 255


def test_mix_batch_and_random_erase():
    from vitviz.data.datasets import mix_batch, random_erase

    g = torch.Generator().manual_seed(0)
    x = torch.arange(4.0)[:, None, None, None].expand(4, 3, 8, 8).contiguous()  # image i is all i
    y = torch.tensor([0, 1, 2, 3])
    xm, t = mix_batch(x, y, 5, p=0.0, generator=g)
    assert torch.equal(xm, x) and torch.equal(t, torch.nn.functional.one_hot(y, 5).float())
    kinds = set()
    for _ in range(40):
        xm, t = mix_batch(x, y, 5, p=1.0, generator=g)
        assert torch.allclose(t.sum(1), torch.ones(4))
        # every image is image i mixed with image 3 - i, and the labels say by how much
        lam = t[0, 0].item()
        assert t[0, 3].item() == pytest.approx(1 - lam, abs=1e-6)
        assert xm[0].mean().item() == pytest.approx(3 * (1 - lam), abs=1e-5)
        kinds.add("cutmix" if set(xm[0].unique().tolist()) <= {0.0, 3.0} and 0 < lam < 1 else "mixup")
    assert kinds == {"cutmix", "mixup"}

    x = torch.zeros(64, 3, 16, 16)
    assert torch.equal(random_erase(x, 0.0, g), x)
    erased = (random_erase(x, 1.0, g) != 0).flatten(1).any(1)
    assert erased.all()
    frac = (random_erase(x, 0.5, g) != 0).flatten(1).any(1).float().mean().item()
    assert 0.2 < frac < 0.8
    area = (random_erase(x, 1.0, g) != 0)[:, 0].flatten(1).float().mean(1)
    assert (area >= 0.01).all() and (area <= 0.4).all()


def test_an_unreadable_image_is_said_in_words_not_an_exception_name(tmp_path):
    good = tmp_path / "good.png"
    Image.new("RGB", (40, 30), (10, 200, 30)).save(good)
    cut = good.read_bytes()[:60]  # a PNG cut short
    cases = {b"this is not a picture at all": "not a picture format", cut: "damaged or cut short"}
    for data, words in cases.items():
        with pytest.raises(ValueError) as e:
            I.open_image(data)
        assert words in str(e.value) and "Error" not in str(e.value), str(e.value)


def test_a_transparent_area_is_white_in_the_thumbnail_as_in_what_the_model_sees():
    """A PNG whose transparent half hides red: the model's pixels and the page's "The image" both show white
    there, and the opaque half the same blue."""
    from PIL import Image

    from vitviz.data.images import to_pixels
    from vitviz.pictures.explanation import original_thumbnail

    a = np.zeros((32, 32, 4), np.uint8)
    a[:, :16] = (255, 0, 0, 0)  # red, fully transparent
    a[:, 16:] = (0, 0, 255, 255)  # blue, opaque
    im = Image.fromarray(a, "RGBA")
    seen, thumb = to_pixels(im, 32, 3), original_thumbnail(im, box=32)
    for picture in (seen, thumb):
        assert (picture[:, 2:14] == 255).all()  # white, not the red underneath
        assert (picture[:, 18:30] == (0, 0, 255)).all()
