"""Turns that search the web, through the real App and model client against the fake API:
the server-side search's blocks kept in the transcript and sent back, its price counted,
paused turns continued, and the cited pages delivered with the reply as its sources (also
for the results of Krill's own SearXNG backend)."""

from __future__ import annotations

from pathlib import Path

from bot.agent.pricing import estimate_cost
from bot.agent.sources import MAX_SOURCES, cited_sources, reply_sources
from bot.types import Source, Usage
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic, Reply, citing_search_results, server_search_blocks
from tests.fakes.search import FakeSearch

KEY = "agent:main:local:direct:alice"
RESULTS = [
    ("https://docs.python.org/3.14/whatsnew/3.14.html", "What's New In Python 3.14"),
    ("https://peps.python.org/pep-0750/", "PEP 750 – Template Strings"),
]
SERVER_SEARCH = """
[tools.web_search]
enabled = true
max_uses = 2
blocked_domains = ["evil.example"]
user_location = { city = "Lisbon", country = "PT" }
"""


async def test_a_server_side_search_reply_carries_its_sources(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.queue(
        Reply.web_search(
            "python 3.14 changes",
            [*RESULTS, ("https://evil.example/x", "Evil")],
            "Python 3.14 adds template strings (PEP 750).",
            cite=(0, 1, 2),
            intro="Let me look that up.",
        )
    )
    fake_anthropic.queue_text("Anything else?")
    async with Harness(tmp_path, fake_anthropic.url, SERVER_SEARCH) as h:
        assert h.app is not None
        await h.send("what changed in python 3.14?")
        await h.send("thanks")
        row = await h.app.store.current_session(KEY)
    first, second = fake_anthropic.message_requests
    (tool,) = [t for t in first.body["tools"] if t["name"] == "web_search"]
    assert {k: v for k, v in tool.items() if k != "cache_control"} == {
        "type": "web_search_20250305",
        "name": "web_search",
        "max_uses": 2,
        "blocked_domains": ["evil.example"],
        "user_location": {"type": "approximate", "city": "Lisbon", "country": "PT"},
    }
    (reply,) = h.channel.finals[:1]
    assert reply == "Let me look that up.Python 3.14 adds template strings (PEP 750)."
    # The search left out the blocked domain, so only the two real pages are sources.
    assert h.channel.deliveries[0].sources == tuple(Source(t, u) for u, t in RESULTS)
    assert h.channel.deliveries[1].sources == ()  # a reply without search has none
    # The next request sends the search back as the API returned it.
    kinds = [b["type"] for m in second.messages if m["role"] == "assistant" for b in m["content"]]
    assert kinds[:4] == ["text", "server_tool_use", "web_search_tool_result", "text"]
    assert row is not None
    usage = first.usage
    assert usage is not None and usage["server_tool_use"]["web_search_requests"] == 1
    # One search at $10 per 1,000 is in the session's cost, on top of the tokens.
    assert row.cost_usd > 0.01


def test_searches_are_priced_per_thousand() -> None:
    tokens = Usage(input_tokens=1000, output_tokens=100)
    searched = Usage(input_tokens=1000, output_tokens=100, web_search_requests=3)
    extra = estimate_cost("claude-sonnet-4-6", searched) - estimate_cost(
        "claude-sonnet-4-6", tokens
    )
    assert round(extra, 6) == 0.03


async def test_a_paused_search_turn_is_continued_and_answered_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    paused = server_search_blocks("python 3.14", RESULTS)
    fake_anthropic.queue(Reply(content=paused, stop_reason="pause_turn"))
    fake_anthropic.queue(Reply.web_search("pep 750", RESULTS[1:], "Template strings it is."))
    async with Harness(tmp_path, fake_anthropic.url, SERVER_SEARCH) as h:
        await h.send("what changed in python 3.14?")
    _, second = fake_anthropic.message_requests
    # The paused reply goes back as the last message, so the model goes on from there.
    last = second.messages[-1]
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["server_tool_use", "web_search_tool_result"]
    assert h.channel.finals == ["Template strings it is."]
    assert h.channel.deliveries[-1].sources == (Source(RESULTS[1][1], RESULTS[1][0]),)


async def test_searxng_results_cited_by_the_model_become_sources(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_search: FakeSearch
) -> None:
    for url, title in RESULTS:
        fake_search.add(url, title, f"python 3.14 news: {title}")
    fake_anthropic.queue_tool_use("web_search", {"query": "python 3.14", "max_results": 2})
    fake_anthropic.queue(citing_search_results("It adds template strings.", cite=(1,)))
    config = (
        f'[tools.web_search]\nenabled = true\nbackend = "searxng"\nbase_url = "{fake_search.url}"\n'
    )
    async with Harness(tmp_path, fake_anthropic.url, config, chunk_size=10) as h:
        await h.send("what changed in python 3.14?")
    assert fake_search.queries("/search") == ["python 3.14"]
    tool_results = [
        b
        for m in fake_anthropic.message_requests[-1].messages
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    (result,) = tool_results
    assert [b["type"] for b in result["content"]] == ["text", "search_result", "search_result"]
    # The reply is cut in chunks; only the last one carries the sources.
    assert [d.sources for d in h.channel.deliveries[:-1]] == [()] * (len(h.channel.deliveries) - 1)
    assert h.channel.deliveries[-1].sources == (Source("peps.python.org", RESULTS[1][0]),)


def test_sources_are_the_cited_pages_once_each_at_most_eight() -> None:
    blocks = [
        {"type": "text", "text": "no citations"},
        {
            "type": "text",
            "text": "cited",
            "citations": [
                {"type": "web_search_result_location", "url": "https://a.example/", "title": "A"},
                {"type": "search_result_location", "source": "https://b.example/", "title": None},
                {"type": "char_location", "document_index": 0},
                {"type": "web_search_result_location", "url": "javascript:alert(1)", "title": "x"},
            ],
        },
    ]
    assert cited_sources(blocks) == [
        Source("A", "https://a.example/"),
        Source("https://b.example/", "https://b.example/"),
    ]
    many = [Source(f"t{i % 10}", f"https://{i % 10}.example/") for i in range(30)]
    kept = reply_sources(many)
    assert len(kept) == MAX_SOURCES and kept[0] == many[0] and len(set(kept)) == MAX_SOURCES
