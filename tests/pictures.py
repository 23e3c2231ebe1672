"""Pictures for tests and benchmarks: a PNG of any size written a row at a time, so a
196-megapixel decompression bomb costs a few hundred kilobytes and no memory to make."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def streamed_png(width: int, height: int, *, alpha: bool = True, texture: bool = False) -> bytes:
    """A `width` x `height` PNG (RGBA, or RGB without `alpha`): blank, which is how a bomb
    looks (14000x14000 is about 750 KB), or with a diagonal `texture` that still compresses
    well but gives the decoder real work."""
    channels = 4 if alpha else 3
    stride = width * channels
    # Each row is a slice of one long ramp: cheap to make, different from its neighbour.
    ramp = bytes(range(256)) * (stride // 256 + 2) if texture else bytes(stride + 256)
    packer = zlib.compressobj(9)
    parts = [b"\x89PNG\r\n\x1a\n"]
    parts.append(
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0))
    )
    pending: list[bytes] = []
    for y in range(height):
        offset = y % 256
        pending.append(packer.compress(b"\x00" + ramp[offset : offset + stride]))
    pending.append(packer.flush())
    parts.append(_chunk(b"IDAT", b"".join(pending)))
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)
