"""Media in the core: image preparation, content-addressed storage, what a person's turn
carries, and old images turning into placeholders only when the prompt cache is cold."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bot.config import MediaConfig, TranscriptionConfig
from bot.context.media import image_placeholders, media_blocks, resolve_media
from bot.context.tokens import messages_tokens
from bot.media.files import MediaFiles
from bot.media.images import ImageRefused, prepare_image
from bot.media.prepare import MediaPreparer, decode_text
from bot.media.transcribe import Transcriber
from bot.transcript import MediaForm, MediaRef
from bot.types import Attachment, MediaKind
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

TOML = """
[memory]
enabled = false
[scheduler]
idle_compaction = false
[media]
image_max_edge = 256
keep_images_turns = 1
"""


MAX_PIXELS = MediaConfig().max_pixels


def png(width: int, height: int, colour: tuple[int, int, int] = (0, 90, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def test_prepare_image_caps_the_long_edge_and_keeps_the_shape() -> None:
    image = prepare_image(png(3000, 1000), 600, MAX_PIXELS)
    assert (image.width, image.height) == (600, 200)
    with Image.open(io.BytesIO(image.data)) as opened:
        assert opened.size == (600, 200) and opened.format == "JPEG"


def test_prepare_image_keeps_transparency_as_png_and_refuses_non_images() -> None:
    out = io.BytesIO()
    Image.new("RGBA", (40, 40), (0, 0, 0, 0)).save(out, "PNG")
    assert prepare_image(out.getvalue(), 600, MAX_PIXELS).mime == "image/png"
    with pytest.raises(ImageRefused, match="not an image Krill can open"):
        prepare_image(b"%PDF-1.4 definitely not a picture", 600, MAX_PIXELS)


def test_media_files_are_content_addressed(tmp_path: Path) -> None:
    files = MediaFiles(tmp_path)
    first = files.put(b"same bytes")
    assert files.put(b"same bytes") == first
    assert files.read(first) == b"same bytes"
    assert len(list(tmp_path.rglob("*"))) == 2  # one folder, one file
    with pytest.raises(ValueError):
        files.path("../../etc/passwd")


def test_binary_files_are_not_decoded_as_text() -> None:
    assert decode_text(b"\x00\x01\x02", 100) is None
    cut = decode_text(b"a" * 50, 10)
    assert cut is not None and cut.startswith("a" * 10) and "first 10 characters" in cut


def image_ref(sha: str, name: str = "cat.jpg") -> MediaRef:
    return MediaRef(MediaForm.IMAGE, name, "image/jpeg", 1000, sha, 1500, 1000)


def turn(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "look"}, *blocks]}


def test_images_count_by_their_pixels_and_become_placeholders_when_old(tmp_path: Path) -> None:
    files = MediaFiles(tmp_path)
    old, new = files.put(b"old image"), files.put(b"new image")
    messages: list[Any] = [
        turn(*media_blocks(image_ref(old, "old.jpg"), "m1")),
        {"role": "assistant", "content": [{"type": "text", "text": "a cat"}]},
        turn(*media_blocks(image_ref(new, "new.jpg"), "m2")),
    ]
    # 1500 x 1000 / 750 = 2000 tokens each, besides the text (a placeholder is ~50).
    assert (
        messages_tokens(messages) - messages_tokens(resolve_media(messages, None)) >= 2 * 2000 - 100
    )
    placeholders = image_placeholders(messages, keep_turns=1)
    resolved = resolve_media(messages, files, placeholders)
    placeholder = resolved[0]["content"][1]["text"]
    assert placeholder.startswith('<<<UNTRUSTED source="file"')
    assert "\n[image: old.jpg, 1500x1000]\n" in placeholder
    assert 'untrusted metadata: {"file":"old.jpg","type":"image/jpeg"}' in placeholder
    sent = resolved[2]["content"][1]
    assert sent["type"] == "image" and base64.b64decode(sent["source"]["data"]) == b"new image"
    assert "krill-media" not in json.dumps(resolved)


async def test_old_images_turn_into_placeholders_only_once_the_cache_is_cold(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    now = [1_000_000.0]
    fake_anthropic.cache.clock = lambda: now[0]
    async with Harness(tmp_path, fake_anthropic.url, TOML, clock=lambda: now[0]) as h:
        photo = dataclasses.replace(
            message("what colour is this?"),
            attachments=[Attachment(MediaKind.IMAGE, "blue.png", "image/png", data=png(800, 400))],
        )
        await h.send(photo)
        first = fake_anthropic.message_requests[-1].body["messages"]
        image = first[-1]["content"][-1]
        assert image["type"] == "image"
        with Image.open(io.BytesIO(base64.b64decode(image["source"]["data"]))) as sent:
            assert sent.size == (256, 128)
        now[0] += 10
        await h.send("and now?")  # warm: the photo is sent again, byte for byte
        warm = fake_anthropic.message_requests[-1].body["messages"]
        assert warm[0]["content"][-1]["source"] == image["source"]
        now[0] += 400
        await h.send("one more")  # cold: older than keep_images_turns, so a placeholder
        cold = json.dumps(fake_anthropic.message_requests[-1].body["messages"])
        assert "[image: blue.png, 256x128]" in cold and '"type": "image"' not in cold
        assert '"file\\":\\"blue.png\\"' in cold  # the name, inside the untrusted block
        stored = list((tmp_path / "data" / "media").rglob("*"))
        assert sum(p.is_file() for p in stored) == 2  # the original and the downscaled copy


async def test_voice_notes_without_transcription_get_a_note_saying_why(tmp_path: Path) -> None:
    files = MediaFiles(tmp_path)
    preparer = MediaPreparer(MediaConfig(), files, Transcriber(TranscriptionConfig()))
    (voice,) = await preparer.accept(
        [Attachment(MediaKind.AUDIO, "voice.oga", "audio/ogg", data=b"OggS...")]
    )
    assert voice.data is None and files.read(voice.sha256) == b"OggS..."
    (ref,) = await preparer.refs([voice])
    assert ref.form == MediaForm.NOTE
    assert "not transcribed: voice transcription is not set up" in ref.note
    assert "tell the person why" in ref.note


async def test_slack_files_never_send_the_token_to_another_host() -> None:
    from channels.slack.files import SlackFiles

    files = SlackFiles("xoxb-secret", "https://slack.com/api/", 1_000_000)
    item = {
        "name": "x.png",
        "mimetype": "image/png",
        "size": 10,
        "url_private_download": "https://attacker.example/x.png",
    }
    (att,) = await files.download([item])
    assert att.data is None and att.error == "the file is not on Slack's file server"
    assert files.allowed_hosts == {"files.slack.com", "slack.com"}
