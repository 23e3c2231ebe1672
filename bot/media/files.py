"""Content-addressed media on disk: `<root>/<sha[:2]>/<sha>`, written once, atomically; and
`<root>/preparing/<sha>`, the mark of a file being prepared, which outlives a process that
dies preparing it."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

PREPARING = "preparing"


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MediaFiles:
    """Stores bytes under their SHA-256, so the same photo sent twice is kept once."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a media hash: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store `data` (if not there yet) and return its hash."""
        digest = sha256_of(data)
        target = self.path(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write beside the target, then rename: a crash never leaves a half file under a hash.
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def read(self, sha256: str) -> bytes:
        """The stored bytes; raises FileNotFoundError if they are gone."""
        return self.path(sha256).read_bytes()

    def begin_preparing(self, sha256: str) -> bool:
        """Mark `sha256` as being prepared; False when the mark of an earlier attempt is
        still there: the process making it died (an out-of-memory kill, say) before
        `end_preparing`, and trying again would only kill this one too."""
        mark = self.root / PREPARING / self.path(sha256).name
        mark.parent.mkdir(parents=True, exist_ok=True)
        try:
            mark.touch(exist_ok=False)
        except FileExistsError:
            return False
        return True

    def end_preparing(self, sha256: str) -> None:
        (self.root / PREPARING / self.path(sha256).name).unlink(missing_ok=True)
