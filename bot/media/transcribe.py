"""Voice notes to text through an OpenAI-compatible endpoint:
`POST {base_url}/audio/transcriptions` (multipart: file, model), answering `{"text": ...}`."""

from __future__ import annotations

import aiohttp

from bot.config import TranscriptionConfig


class TranscriptionUnavailable(Exception):
    """Why a voice note could not be transcribed, in words the person may read."""


class Transcriber:
    def __init__(self, config: TranscriptionConfig) -> None:
        self.config = config

    @property
    def enabled(self) -> bool:
        return bool(self.config.base_url)

    async def transcribe(self, data: bytes, name: str, mime: str) -> str:
        """The transcript of `data`; raises TranscriptionUnavailable on any failure."""
        config = self.config
        if not config.base_url:
            raise TranscriptionUnavailable("voice transcription is not set up on this Krill")
        form = aiohttp.FormData()
        form.add_field("model", config.model)
        form.add_field("file", data, filename=name, content_type=mime or "audio/ogg")
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        url = config.base_url.rstrip("/") + "/audio/transcriptions"
        timeout = aiohttp.ClientTimeout(total=config.timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.post(url, data=form, headers=headers) as response,
            ):
                if response.status != 200:
                    raise TranscriptionUnavailable(
                        f"the transcription service answered HTTP {response.status}"
                    )
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise TranscriptionUnavailable(
                f"the transcription service could not be reached ({type(exc).__name__})"
            ) from exc
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise TranscriptionUnavailable("the transcription service sent no text")
        return text.strip()
