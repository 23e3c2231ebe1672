"""Shared fixtures: the loopback fakes of the Anthropic, OpenAI-compatible, Telegram, Slack,
embeddings and web search servers, the throwaway PostgreSQL server, and the check that no
test leaves a Krill process running."""

from collections.abc import Iterator

import pytest

from tests.children import kill_tree, krill_children

pytest_plugins = [
    "tests.fakes.anthropic",
    "tests.fakes.openai",
    "tests.fakes.telegram",
    "tests.fakes.slack",
    "tests.fakes.embeddings",
    "tests.fakes.search",
    "tests.postgres",
    "tests.slack_channel",
]


# A test that replaces its module's Krill process (a restart) leaves the new one to the
# module's fixture, which stops it: the module, not the test, is checked for it.
HANDS_KRILL_TO_MODULE = "hands_krill_to_module"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{HANDS_KRILL_TO_MODULE}: the Krill this test starts is its module's"
    )


def _stop_leaks(before: dict[int, str], owner: str) -> None:
    leaked = {pid: cmd for pid, cmd in krill_children().items() if pid not in before}
    for pid in leaked:
        kill_tree(pid)
    if leaked:
        lines = "\n".join(f"  {pid}: {cmd}" for pid, cmd in leaked.items())
        pytest.fail(f"{owner} left Krill running (now killed):\n{lines}", pytrace=False)


@pytest.fixture(autouse=True)
def no_krill_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that leaves a `krill` process it started running, and kills it. Set up
    after the module's own fixtures, so a process a module-scoped fixture keeps for all its
    tests counts against the module (below), not against each test."""
    before = krill_children()
    yield
    if request.node.get_closest_marker(HANDS_KRILL_TO_MODULE) is None:
        _stop_leaks(before, request.node.nodeid)


@pytest.fixture(autouse=True, scope="module")
def no_krill_left_by_module(request: pytest.FixtureRequest) -> Iterator[None]:
    before = krill_children()
    yield
    _stop_leaks(before, request.node.nodeid)
