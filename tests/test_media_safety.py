"""Media people send cannot exhaust memory or speak for Krill: images are refused from their
header above `media.max_pixels`, decoded in bounded memory one at a time, and every file
name and type the sender chose reaches the model only inside an untrusted block, as one
clean line.

Memory is checked the way a container limit would: the work runs in a child process whose
address space may grow only by a fixed headroom, so decoding more than promised fails
there with MemoryError instead of passing quietly. The child uses one malloc arena: each
thread's own arena would reserve 64 MB of address space it never touches.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bot.config import load_config
from bot.context.media import image_placeholders, media_blocks, resolve_media
from bot.errors import ConfigError
from bot.media.files import MediaFiles
from bot.transcript import MediaForm, MediaRef
from bot.types import Attachment, MediaKind
from channels.registry import CHANNELS
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic
from tests.hostile_names import HOSTILE_NAMES, assert_contained, names_in
from tests.pictures import streamed_png

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024

# Runs `body` with `data` (the bytes of argv[1]) once the address space may only grow by
# argv[2] bytes; prints what `body` printed, or the exception that escaped it.
CHILD = """
import asyncio, resource, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from bot.config import MediaConfig, TranscriptionConfig
from bot.media.files import MediaFiles
from bot.media.images import ImageRefused, prepare_image
from bot.media.prepare import MediaPreparer
from bot.media.transcribe import Transcriber
from bot.types import Attachment, MediaKind
paths = sys.argv[1].split(",")
pictures = [Path(p).read_bytes() for p in paths]
status = Path("/proc/self/status").read_text()
size = int(next(l for l in status.splitlines() if l.startswith("VmSize")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[2]), resource.RLIM_INFINITY))
{body}
"""


def under_headroom(pictures: list[Path], headroom: int, body: str) -> str:
    code = CHILD.format(root=str(ROOT), body=textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, "-c", code, ",".join(map(str, pictures)), str(headroom)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"MALLOC_ARENA_MAX": "1"},
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize(
    ("width", "height", "refusal"),
    [
        # 196 Mpx RGBA in 0.8 MB, 784 MB decoded: over Pillow's own limit too.
        (14000, 14000, "it has over 100 million pixels, over the 40 million limit"),
        (9000, 5000, "it is 9000x5000 pixels (45.0 million), over the 40 million limit"),
    ],
)
def test_a_decompression_bomb_is_refused_from_its_header_without_decoding(
    width: int, height: int, refusal: str, tmp_path: Path
) -> None:
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(streamed_png(width, height))
    out = under_headroom(
        [bomb],
        64 * MB,
        """
        try:
            prepare_image(pictures[0], 1568, 40_000_000)
        except ImageRefused as exc:
            print("refused:", exc)
        """,
    )
    assert f"refused: {refusal}" in out, out


def test_an_album_of_large_pngs_is_prepared_one_at_a_time_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """Three 40 Mpx RGBA PNGs at once: one decoded picture (4 bytes a pixel, 160 MB) plus
    room for its reduced copy, never two pictures, nor the premultiplied copy Pillow makes
    of a whole RGBA picture to scale it."""
    pictures = []
    for i, (width, height) in enumerate([(8000, 5000), (5000, 8000), (6400, 6250)]):
        path = tmp_path / f"album{i}.png"
        path.write_bytes(streamed_png(width, height, texture=True))
        pictures.append(path)
    out = under_headroom(
        pictures,
        160 * MB + 112 * MB,
        f"""
        preparer = MediaPreparer(
            MediaConfig(), MediaFiles(Path({str(tmp_path / "media")!r})),
            Transcriber(TranscriptionConfig()),
        )
        files = [
            Attachment(MediaKind.IMAGE, f"p{{i}}.png", "image/png", data=data)
            for i, data in enumerate(pictures)
        ]
        for att in asyncio.run(preparer.accept(files)):
            print("prepared", att.width, att.height, att.mime, repr(att.refused))
        """,
    )
    assert out.splitlines() == [
        "prepared 1568 980 image/png ''",
        "prepared 980 1568 image/png ''",
        "prepared 1568 1531 image/png ''",
    ], out


def test_max_pixels_may_not_exceed_what_pillow_is_allowed_to_open(tmp_path: Path) -> None:
    config = tmp_path / "krill.toml"
    config.write_text("[media]\nmax_pixels = 200_000_000\n")
    with pytest.raises(ConfigError, match=r"media\.max_pixels"):
        load_config(str(config), env={"ANTHROPIC_API_KEY": "test"}, channels=CHANNELS)


# ---- names from outside ------------------------------------------------------------------


@pytest.mark.parametrize("kind", HOSTILE_NAMES)
async def test_hostile_file_names_reach_the_model_only_inside_the_untrusted_block(
    kind: str, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    name, payload = HOSTILE_NAMES[kind]
    toml = "[memory]\nenabled = false\n[media]\nmax_pixels = 1000\n"
    tiny = io.BytesIO()
    Image.new("RGB", (40, 40)).save(tiny, "PNG")
    async with Harness(tmp_path, fake_anthropic.url, toml) as h:
        msg = dataclasses.replace(
            message("what did I send?"),
            attachments=[
                Attachment(MediaKind.FILE, name, "text/plain", data=b"just a list"),
                Attachment(MediaKind.FILE, name, "application/zip", data=b"PK\x03\x04 zipped"),
                Attachment(MediaKind.AUDIO, name, "audio/ogg", data=b"OggS voice"),
                Attachment(MediaKind.IMAGE, name, "image/png", data=tiny.getvalue()),  # too big
                Attachment(MediaKind.FILE, "notes.txt", name, data=b"a hostile type"),
            ],
        )
        await h.send(msg)
    request = fake_anthropic.message_requests[-1]
    user = request.messages[-1]["content"]
    text = "\n".join(b["text"] for b in user if b["type"] == "text")
    assert_contained(text, payload)
    assert "just a list" in text and "a hostile type" in text  # the files did arrive
    assert len(names_in(text)) == 10  # each file's name and type, inside its block
    # The person is told about the image in one line, whatever its name.
    (notice,) = [t for t in h.channel.finals if t.startswith("I can't open")]
    assert "\n" not in notice and "\x1b" not in notice and len(notice) < 400
    assert "over the 0.001 million limit for images" in notice


@pytest.mark.parametrize("kind", HOSTILE_NAMES)
def test_hostile_names_of_old_images_stay_inside_the_untrusted_block(
    kind: str, tmp_path: Path
) -> None:
    name, payload = HOSTILE_NAMES[kind]
    files = MediaFiles(tmp_path)
    ref = MediaRef(MediaForm.IMAGE, name, "image/jpeg", 10, files.put(b"pixels"), 800, 600)
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, *media_blocks(ref, "m1")]},
        {"role": "assistant", "content": [{"type": "text", "text": "a cat"}]},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    resolved = resolve_media(messages, files, image_placeholders(messages, keep_turns=0))
    placeholder = resolved[0]["content"][1]["text"]
    assert placeholder.startswith('<<<UNTRUSTED source="file"') and ", 800x600]" in placeholder
    assert_contained(placeholder, payload)
