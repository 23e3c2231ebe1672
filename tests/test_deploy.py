"""The deployment config, set up as the Dockerfile does it: deploy/krill.toml in a folder,
`krill init` beside it, then `krill run`: healthy, listening on every interface, store and
workspace in the two folders the container and the systemd unit let it write, web chat off."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from tests.krill_process import KrillProcess, free_port, run_cli

DEPLOY_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "krill.toml"


def reachable_address() -> str:
    """An address of this host other than loopback, if it has one, else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:  # no route off this host
            return "127.0.0.1"
        return str(s.getsockname()[0])


async def test_deploy_config_runs_as_the_image_sets_it_up(tmp_path: Path) -> None:
    port = free_port()
    # KrillProcess writes its own krill.toml; the deploy file replaces it, the port (which
    # must not clash with other tests) comes from the environment as an operator's would.
    krill = KrillProcess(tmp_path, {"server": {"port": port}}, {"KRILL_SERVER__PORT": str(port)})
    shutil.copyfile(DEPLOY_CONFIG, krill.config_path)
    code, out, err = await run_cli(tmp_path, "init", str(tmp_path))
    assert code == 0, err
    assert "already exists" in out  # the deploy config is kept
    assert (tmp_path / "workspace" / "SOUL.md").is_file()
    await krill.start()
    try:
        assert (tmp_path / "data" / "krill.db").is_file()
        status, _ = await krill.get("/healthz")
        assert status == 200
        address = reachable_address()
        with socket.create_connection((address, port), timeout=5):
            pass  # bound to every interface, not only loopback
        status, _ = await krill.get("/")
        assert status == 404  # no local.token: the web chat stays off beyond loopback
        assert "local.token is not set" in krill.log()
    finally:
        assert await krill.stop() == 0
