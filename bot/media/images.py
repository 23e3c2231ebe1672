"""Image preparation with Pillow: EXIF orientation applied, downscaled to a long edge,
metadata stripped, re-encoded in a format the model accepts."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from PIL import Image, ImageOps

# Formats the model reads; anything else Pillow opens is converted to PNG or JPEG.
MODEL_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
JPEG_QUALITY = 85
# Refuse decompression bombs well before they exhaust memory (about 100 megapixels).
Image.MAX_IMAGE_PIXELS = 100_000_000


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    mime: str
    width: int
    height: int


def prepare_image(data: bytes, max_edge: int) -> PreparedImage:
    """`data` as the model should see it. Raises ValueError for bytes that are no image."""
    try:
        with Image.open(io.BytesIO(data)) as opened:
            source_format = opened.format or ""
            # JPEG decodes straight at 1/2, 1/4 or 1/8 scale when that still covers the
            # target: a 12 MP photo then costs a fraction of a full decode.
            scale = max_edge / max(opened.size)
            if scale < 1:
                opened.draft(
                    "RGB", (math.ceil(opened.width * scale), math.ceil(opened.height * scale))
                )
            # Downscaled before the EXIF rotation (the bound is square, so the size is the
            # same), which then turns a small picture; reducing_gap first shrinks by whole
            # factors, and LANCZOS does the last, fine step.
            opened.thumbnail((max_edge, max_edge), Image.Resampling.LANCZOS, reducing_gap=3.0)
            image = ImageOps.exif_transpose(opened)
    except (OSError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"not a readable image ({exc})") from exc
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if source_format == "JPEG" or not has_alpha:
        fmt = "JPEG"
        if image.mode != "RGB":  # convert() always copies; most photos are RGB already
            image = image.convert("RGB")
    else:
        fmt = "PNG"
    out = io.BytesIO()
    # A fresh save without exif= or pnginfo= writes no metadata (location, camera, ...).
    if fmt == "JPEG":
        image.save(out, fmt, quality=JPEG_QUALITY, optimize=True)
    else:
        image.save(out, fmt, optimize=True)
    return PreparedImage(out.getvalue(), MODEL_FORMATS[fmt], image.width, image.height)
