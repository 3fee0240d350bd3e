"""Any one image into what a model sees: the one path the CLI, the app, the API and the tests share.

`open_image` reads a file or bytes safely (its size checked from the header before anything is decoded);
`to_pixels` turns any PIL image into the uint8 pixels of the model's input (the centre square, or the model's
own processor's resize and crop for a `transformers` model); `preprocess` gives the normalised tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

import io
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps

from vitviz.data.datasets import MAX_PIXELS, normalize

IMAGE_TYPES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")  # a folder's images, by suffix


def open_image(path_or_bytes: str | Path | bytes) -> Image.Image:
    """Open an image file with the decompression-bomb guard; raises ValueError with a readable message."""
    try:
        im = Image.open(path_or_bytes if not isinstance(path_or_bytes, bytes) else io.BytesIO(path_or_bytes))
        if im.width * im.height > MAX_PIXELS:  # checked from the header, before decoding anything
            raise Image.DecompressionBombError("too many pixels")
        if im.format == "JPEG" and max(im.size) > 2048:
            im.draft(im.mode, (1024, 1024))  # decode a big photo at a reduced scale: inputs are 224 px at most
        im.load()
        return im
    except Image.DecompressionBombError:
        raise ValueError(
            f"this image is too large to open safely (over {MAX_PIXELS // 1_000_000} megapixels)"
        ) from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"this file is not an image that can be read ({_why_not(e)})") from None


def _why_not(e: Exception) -> str:
    """Why an image could not be opened, in words (never an exception's class name)."""
    if isinstance(e, Image.UnidentifiedImageError):
        return "its contents are not a picture format this app knows: PNG, JPEG, GIF, WebP, BMP, TIFF"
    if isinstance(e, OSError):
        return "it is damaged or cut short"
    return "its header is broken"


def flattened(image: Image.Image) -> Image.Image:
    """The image as the model and the page both show it: its first frame, EXIF orientation applied, 16-bit and
    float modes rescaled to 8 bits, and transparency composited on white (what a transparent area hides is
    never shown)."""
    try:
        image.seek(0)  # first frame of an animation
    except (EOFError, AttributeError):
        pass
    im = ImageOps.exif_transpose(image)
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        a = np.asarray(im).astype(np.float64)
        hi = 255.0 if a.max(initial=0) <= 255 else (65535.0 if a.max() <= 65535 else float(a.max()))
        im = Image.fromarray(np.clip(a / hi * 255.0, 0, 255).astype(np.uint8), "L")
    if im.mode == "P":
        im = im.convert("RGBA")
    if im.mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        im = im.convert("RGBA")
        bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(bg, im)
    return im


def to_pixels(
    image: Image.Image, size: int, in_chans: int, invert_light: bool = False, prepare: tuple = ()
) -> np.ndarray:
    """Any PIL image -> uint8 array (size, size, in_chans): EXIF orientation applied, alpha
    composited on white, 16-bit and float modes rescaled, the centre square resized (bicubic); or, with
    `prepare` (a card's, vitviz.models.card), resized and cropped as the model's own image processor does."""
    if not isinstance(image, Image.Image):
        raise ValueError("expected an image")
    if image.width < 1 or image.height < 1:
        raise ValueError("the image is empty")
    if image.width * image.height > MAX_PIXELS:
        raise ValueError(f"this image is too large (over {MAX_PIXELS // 1_000_000} megapixels)")
    try:
        im = flattened(image).convert("RGB" if in_chans == 3 else "L")
    except (ValueError, OSError) as e:
        raise ValueError(f"images in colour mode {image.mode} are not supported ({e})") from None
    if prepare:
        return np.asarray(_processed(im, prepare), dtype=np.uint8).reshape(size, size, in_chans)
    if max(im.size) > 4 * size:  # cheap downscale before the careful one
        im.thumbnail(
            (4 * size * max(1, im.width // im.height), 4 * size * max(1, im.height // im.width)), Image.BILINEAR
        )
    im = ImageOps.fit(im, (size, size), Image.BICUBIC)
    arr = np.asarray(im, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if invert_light and in_chans == 1:
        border = np.concatenate([arr[0].ravel(), arr[-1].ravel(), arr[:, 0].ravel(), arr[:, -1].ravel()])
        if border.mean() > 127:  # dark strokes on paper: MNIST digits are light on dark
            arr = 255 - arr
    return arr


def _processed(im: Image.Image, prepare: tuple) -> Image.Image:
    """`im` resized and cropped as a `transformers` image processor does (PIL, its resampling filter):
    ("shortest", edge, crop, resample): the shorter side to `edge`, the other in proportion (rounded down),
    then the centre crop x crop; ("exact", height, width, resample): resized to height x width."""
    how, a, b, resample = prepare
    if how == "exact":
        return im.resize((b, a), resample=resample)
    short, long = (im.width, im.height) if im.width <= im.height else (im.height, im.width)
    new_long = int(a * long / short)
    w, h = (a, new_long) if im.width <= im.height else (new_long, a)
    im = im.resize((w, h), resample=resample)
    top, left = (h - b) // 2, (w - b) // 2
    return im.crop((left, top, left + b, top + b))


def pixels_to_tensor(pixels: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...]) -> torch.Tensor:
    """uint8 (H, W, C) -> normalised float (1, C, H, W)."""
    x = torch.from_numpy(np.array(pixels, dtype=np.uint8)).permute(2, 0, 1)[None]
    return normalize(x, mean, std)
