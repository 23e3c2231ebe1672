"""An OpenAI-compatible speech-to-text server for tests: `POST /v1/audio/transcriptions`
(multipart `file` + `model`, Bearer key) answering `{"text": ...}` like the real API, with
401 for a wrong key and 400 for a request without a file."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Transcribed:
    filename: str
    content_type: str
    data: bytes
    model: str


@dataclass
class FakeTranscription:
    api_key: str = "sk-transcribe-test"
    # What each uploaded file "says", by its bytes; unknown audio gets `default_text`.
    texts: dict[bytes, str] = field(default_factory=dict)
    default_text: str = "hello from a voice note"
    requests: list[Transcribed] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    url: str = ""

    async def __aenter__(self) -> FakeTranscription:
        app = web.Application(client_max_size=26 * 1024 * 1024)  # the API's 25 MB upload cap
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        body = {"error": {"message": message, "type": "invalid_request_error"}}
        return web.json_response(body, status=status)

    async def _transcribe(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._error(401, "Incorrect API key provided")
        if request.content_type != "multipart/form-data":
            return self._error(400, "Expected multipart/form-data")
        form = await request.post()
        upload = form.get("file")
        model = form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str):
            return self._error(400, "file and model are required")
        data = upload.file.read()
        self.requests.append(Transcribed(upload.filename, upload.content_type, data, model))
        return web.json_response({"text": self.texts.get(data, self.default_text)})
