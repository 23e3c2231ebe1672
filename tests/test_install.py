"""Installing as README says works: a fresh `python3 -m venv` with the pip it ships (no
upgrade), `pip install -e .`, and everything `web_fetch` needs imports and extracts a page.

Older pips skip the `lxml[html_clean]` extra trafilatura asks for, which once left
`lxml.html.clean` missing for anyone who followed README; this test uses that very pip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the fresh venv: the imports web_fetch makes, then a real extraction.
WEB_FETCH_CHECK = """
import lxml.html.clean
import trafilatura
from bot.tools.web_fetch import html_to_text

page = (
    "<html><head><title>Krill install check</title></head><body><article>"
    "<h1>Plankton</h1><p>Krill are small crustaceans that live in every ocean of the world "
    "and feed on phytoplankton near the surface at night.</p></article></body></html>"
)
title, text = html_to_text(page, "https://example.org/krill")
assert title == "Krill install check", title
assert "small crustaceans" in text, text
print("web_fetch ok")
"""


@pytest.mark.timeout(300)
def test_readme_install_gives_a_working_web_fetch(tmp_path: Path) -> None:
    python3 = shutil.which("python3")
    assert python3 is not None, "README's commands need python3 on PATH"
    # The venv's own interpreter and packages only, as for someone following README.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    venv = tmp_path / "venv"

    def run(*args: str | Path) -> str:
        done = subprocess.run(
            [str(a) for a in args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
        )
        assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    run(python3, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "--quiet", "-e", ROOT)
    assert run(venv / "bin" / "python", "-c", WEB_FETCH_CHECK).strip() == "web_fetch ok"
