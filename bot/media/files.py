"""Content-addressed media on disk: `<root>/<sha[:2]>/<sha>`, written once, atomically; and
`<root>/preparing/<sha>`, the mark of a file being prepared, which outlives a process that
dies preparing it. A file no row refers to any more is swept away (`sweep`), once it has
not been stored for a while: the row naming a file is written just after the file."""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PREPARING = "preparing"
# A file stored (or stored again) this recently is kept even with no row naming it yet.
SWEEP_GRACE_SECONDS = 86_400.0


@dataclass(frozen=True)
class Swept:
    files: int = 0
    size: int = 0  # bytes freed


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
            # Fresh again, so a sweep running before this file's new row is written keeps it.
            os.utime(target)
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

    def sweep(self, in_use: set[str], now: float | None = None) -> Swept:
        """Delete every stored file whose hash is not `in_use` and that was last stored more
        than SWEEP_GRACE_SECONDS ago; preparation marks and partial writes are left alone."""
        before = (time.time() if now is None else now) - SWEEP_GRACE_SECONDS
        files = size = 0
        for path in self.root.glob("??/*"):
            if path.name in in_use or path.name.startswith(".") or path.parent.name == PREPARING:
                continue
            try:
                stat = path.stat()
                if stat.st_mtime >= before:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            files, size = files + 1, size + stat.st_size
        return Swept(files, size)
