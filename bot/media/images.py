"""Image preparation with Pillow: refused from the header when it has more pixels than
`media.max_pixels`, decoded in bounded memory, EXIF orientation applied, downscaled to a
long edge, metadata stripped, re-encoded in a format the model accepts.

Memory: a JPEG decodes straight at 1/2, 1/4 or 1/8 scale, so a 12 MP photo costs a few MB.
The other formats have no reduced-scale decode, so the picture is decoded whole, at 4 bytes
a pixel (Pillow keeps RGB in 4 bytes too): 160 MB at the default 40 Mpx limit. Nothing
else ever holds the whole picture: it is converted and box-reduced a band of rows at a
time, and the decoded copy is freed before the last, finer step. Callers decode one image
at a time (`MediaPreparer`), so that bound holds for the process.
"""

from __future__ import annotations

import io
import logging
import math
import warnings
from dataclasses import dataclass

from PIL import ExifTags, Image, ImageOps, PngImagePlugin

from bot.config import MAX_PIXELS_CEILING

log = logging.getLogger(__name__)

# Formats the model reads; anything else Krill opens is converted to PNG or JPEG.
MODEL_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
# The only decoders a person's file is offered to: Pillow's others (EPS through
# Ghostscript, PSD, icon formats whose size is not the header's) stay out of reach.
OPEN_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")
JPEG_QUALITY = 85
# Whole-factor box reduction first, so the last, LANCZOS step shrinks by less than this.
REDUCING_GAP = 2
# Rows converted and reduced at a time: a band, never a second copy of the whole picture
# (a whole-image convert, or the premultiplied copy Pillow makes to reduce RGBA, would be).
BAND_ROWS = 256

# Pillow's own bomb check covers every image this process opens. Between its limit and
# twice that it only warns, which is how a 196 Mpx PNG used to be decoded: the warning is
# an error here, and Krill's own, lower `media.max_pixels` check comes first anyway.
Image.MAX_IMAGE_PIXELS = MAX_PIXELS_CEILING
warnings.simplefilter("error", Image.DecompressionBombWarning)
# PNG text chunks are read with the header and never used; Pillow would allow 64 MB.
PngImagePlugin.MAX_TEXT_MEMORY = 4 * PngImagePlugin.MAX_TEXT_CHUNK


class ImageRefused(Exception):
    """Why an image is not prepared, in words the person may read."""


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    mime: str
    width: int
    height: int


def too_many_pixels(width: int, height: int, max_pixels: int) -> str:
    return (
        f"it is {width}x{height} pixels ({width * height / 1e6:.1f} million), over the "
        f"{max_pixels / 1e6:g} million limit for images"
    )


def prepare_image(data: bytes, max_edge: int, max_pixels: int) -> PreparedImage:
    """`data` as the model should see it. Raises ImageRefused for bytes that are no image
    Krill opens, and for a picture of more than `max_pixels` pixels: that is read from the
    header, before anything is decoded."""
    try:
        with Image.open(io.BytesIO(data), formats=OPEN_FORMATS) as opened:
            width, height = opened.size
            if width * height > max_pixels:
                raise ImageRefused(too_many_pixels(width, height, max_pixels))
            return _prepare(opened, max_edge)
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        log.info("image refused by Pillow's own limit: %s", exc)
        raise ImageRefused(
            f"it has over {MAX_PIXELS_CEILING / 1e6:g} million pixels, over the "
            f"{max_pixels / 1e6:g} million limit for images"
        ) from None
    except MemoryError:
        raise ImageRefused("there was not enough memory to open it") from None
    except Exception as exc:  # a decoder's error on malformed input: the file, not Krill
        log.info("image not readable: %s: %s", type(exc).__name__, exc)
        raise ImageRefused("it is not an image Krill can open (JPEG, PNG, GIF, WebP)") from exc


def _prepare(opened: Image.Image, max_edge: int) -> PreparedImage:
    has_alpha = opened.mode in ("RGBA", "LA", "PA") or "transparency" in opened.info
    mode = "RGBA" if has_alpha else "RGB"
    if max(opened.size) > max_edge:
        scale = max_edge / max(opened.size)
        # A JPEG then decodes at the smallest 1/2^k scale that still covers the target.
        opened.draft("RGB", (math.ceil(opened.width * scale), math.ceil(opened.height * scale)))
    opened.load()
    orientation = opened.getexif().get(ExifTags.Base.Orientation)
    image = _reduced(opened, math.ceil(max(opened.size) / (max_edge * REDUCING_GAP)), mode)
    if image is not opened:
        opened.close()  # frees the decoded picture before the finer step
    image.thumbnail((max_edge, max_edge), Image.Resampling.LANCZOS, reducing_gap=None)
    # Downscaled before the rotation (the bound is square, so the size is the same), which
    # then turns a small picture.
    if orientation:
        image.getexif()[ExifTags.Base.Orientation] = orientation
    image = ImageOps.exif_transpose(image)
    out = io.BytesIO()
    # A fresh save without exif= or pnginfo= writes no metadata (location, camera, ...).
    if mode == "RGB":
        image.save(out, "JPEG", quality=JPEG_QUALITY, optimize=True)
        fmt = "JPEG"
    else:
        image.save(out, "PNG")
        fmt = "PNG"
    return PreparedImage(out.getvalue(), MODEL_FORMATS[fmt], image.width, image.height)


def _reduced(image: Image.Image, factor: int, mode: str) -> Image.Image:
    """`image` in `mode`, box-reduced `factor` times, built a band of rows at a time; the
    image itself when there is nothing to do."""
    if factor == 1 and image.mode == mode:
        return image
    width, height = image.size
    out = Image.new(mode, (math.ceil(width / factor), math.ceil(height / factor)))
    rows = factor * max(1, BAND_ROWS // factor)
    for top in range(0, height, rows):
        band = image.crop((0, top, width, min(top + rows, height))).convert(mode)
        out.paste(band.reduce(factor) if factor > 1 else band, (0, top // factor))
    return out
