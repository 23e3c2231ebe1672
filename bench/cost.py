"""Benchmark: what a long, multi-day conversation costs, with and without Krill's context
management, against a fake Anthropic server that simulates prompt caching exactly.

A scripted conversation (300+ user turns in bursts separated by idle gaps of a minute to a
day, on a simulated clock; pasted text; tool results of 1-60 KB; identifiers planted early
and asked about again much later) is replayed twice through the real core (App, runner,
store, model client over HTTP):

  baseline  full history, prompt caching on, no pruning or compaction; priced both without
            caching (a) and with it (b). The fake accepts any length here, so these are what
            the conversation would cost if the model had no context limit.
  krill     the full context pipeline (c), against a fake that enforces a 200k window.
  (d)       a lower bound for Krill's own requests: every block written to the cache once and
            read by every later request that repeats it, with no expiry.
  (e)       (c) with a forgetful summarizer that drops one identifier in five on every pass,
            retries included, so only the identifier guard keeps them.

Shortly before the cache would expire in an idle gap, the replay does what `krill run`'s
scheduler does (`IdleWork.compact_warm`): a session past `context.warm_compaction_tokens`,
or a smaller one when that is cheaper, is compacted while the summary can still read the
cache. `--cjk` replays the script in
Chinese (the fake's tokenizer charges a token per CJK character, as real ones do).

Prices: Sonnet, $3/M input, cache write x1.25 (5m) or x2 (1h), read x0.1, $15/M output.

`--provider openai` replays (a)-(c) against the fake OpenAI-compatible server instead, through
Krill's Chat Completions adapter, with its automatic prefix caching (prompts of 1,024 tokens
or more, a repeated prefix read in steps of 128 tokens, kept 10 minutes after its last use,
no write premium) and a 128k window; priced like gpt-4.1 ($2/M input, $0.50/M cached, $8/M
output). `--provider both` (the default) prints both tables.

Run: python bench/cost.py [--turns 320] [--seed 7] [--cache-ttl 5m|1h] [--cjk]
     [--provider anthropic|openai|both]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.context.compaction.prompts import IN_PLACE_PROMPT, SUMMARIZER_SYSTEM
from bot.context.pipeline import ContextPipeline
from bot.scheduler.idle import warm_compaction_considered
from bot.tools.registry import Tool
from bot.types import Address, ChatType, InboundMessage
from tests.app_harness import Harness
from tests.fakes.anthropic import (
    CacheSimulator,
    FakeAnthropic,
    Reply,
    estimate_tokens,
)
from tests.fakes.openai import ChatReply, FakeOpenAI, ModelSpec, PrefixCache

# Prices in dollars per token (Sonnet) and the cache multipliers on input.
INPUT_PRICE = 3.0 / 1_000_000
OUTPUT_PRICE = 15.0 / 1_000_000
WRITE_5M = 1.25
WRITE_1H = 2.0
READ = 0.1

WINDOW = 200_000
# The OpenAI-compatible run: a 128k model priced like gpt-4.1, per token.
OPENAI_WINDOW = 128_000
OPENAI_MODEL = "gpt-bench"
OPENAI_PRICES = (2.0 / 1_000_000, 0.5 / 1_000_000, 8.0 / 1_000_000)  # input, cached, output
TARGET_SHARE_OF_NAIVE = 0.016
TARGET_OVER_LOWER_BOUND = 2.0
# The pre-expiry moment of `krill run`'s scheduler: memory.flush.idle_lead_seconds before
# the cache TTL runs out.
IDLE_LEAD_SECONDS = 30.0
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
IN_PLACE_MARK = IN_PLACE_PROMPT.split("]", 1)[0]
FORGET_EVERY = 5  # the forgetful summarizer drops every fifth identifier it is asked for
# A tool result kept on disk (only its preview in context) is read further now and then: one
# more page for every fourth report; and page after page until a planted identifier shows.
PAGE_BACK_EVERY = 4
NEXT_PAGE_RE = re.compile(r'read_tool_result\(id="([0-9a-f]{12})", from_line=(\d+), lines=(\d+)\)')

# The script's shape.
BURST_TURNS = (3, 14)
TYPING_GAP = (15.0, 120.0)  # seconds between turns within a burst
IDLE_GAP = (60.0, 86_400.0)  # seconds between bursts, drawn log-uniformly
MODEL_LATENCY = (2.0, 8.0)  # simulated seconds per model call
USER_CHARS = (40, 600)
PASTE_CHARS = (2_000, 8_000)
REPLY_CHARS = (300, 3_000)
TOOL_BYTES = (1_000, 60_000)
TOOL_SHARE = 0.25
PASTE_SHARE = 0.12
RECALL_DELAY_TURNS = (120, 160)

KEY_USER = "dana"
PLANTS: list[tuple[str, str, str]] = [
    ("the release commit", "3f9c2a7d1e0b", "user"),
    ("the latency dashboard", "https://grafana.example.com/d/4f7a9c/latency", "tool"),
    ("the release archive", "/srv/krill/releases/2026-11-02/app.tar.gz", "user"),
    ("the staging database", "db-7.internal.example:5432", "tool"),
    ("the invoice number", "40817365", "user"),
    ("the incident ticket", "OPS-4821", "tool"),
    ("the vpn gateway", "10.20.3.41:8443", "user"),
    ("the backup job id", "b7e19f04c2d8", "tool"),
    ("the budget sheet", "~/reports/q3-budget.xlsx", "user"),
    ("the trace id", "123e4567-e89b-12d3-a456-426614174000", "tool"),
]

LATIN_WORDS = (
    "the we should check deploy budget plan meeting tomorrow report team numbers review "
    "draft notes client feedback update schedule server logs error latency release invoice "
    "travel dinner weekend project roadmap quarter hiring design metrics dashboard storage "
    "backup migration cost estimate summary question answer idea follow please thanks maybe "
    "later first second next friday monday morning evening week month year"
).split()
CJK_WORDS = (
    "我们 应该 检查 部署 预算 计划 会议 明天 报告 团队 数字 审查 草稿 笔记 客户 反馈 更新 "
    "日程 服务器 日志 错误 延迟 发布 发票 旅行 晚餐 周末 项目 路线图 季度 招聘 设计 指标 "
    "仪表盘 存储 备份 迁移 成本 估算 总结 问题 答案 想法 跟进 谢谢 也许 以后 第一 第二 "
    "下一个 星期五 星期一 早上 晚上 本周 本月 今年"
).split()
WORDS = LATIN_WORDS


@dataclass
class Plant:
    label: str
    value: str
    via: Literal["user", "tool"]


@dataclass
class Turn:
    index: int
    at: float
    text: str
    reply_chars: int
    tool_bytes: int = 0
    plant: Plant | None = None
    recall: Plant | None = None
    opens_burst: bool = False


def words(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:chars]


def paste(rng: random.Random, chars: int) -> str:
    lines = []
    while sum(len(x) + 1 for x in lines) < chars:
        indent = "    " * rng.randint(0, 3)
        lines.append(f"{indent}{rng.choice(WORDS)}_{rng.randint(0, 99)} = {words(rng, 40)}")
    return "\n".join(lines)[:chars]


def tool_output(seed: int, size: int, plant: Plant | None) -> str:
    """Log-like text of exactly `size` characters, with identifier noise in every line."""
    rng = random.Random(seed)
    lines = []
    total = 0
    while total < size:
        line = (
            f"2026-11-0{rng.randint(1, 9)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:00Z "
            f"worker-{rng.randint(1, 9)} {rng.choice(['INFO', 'WARN', 'DEBUG'])} "
            f"{words(rng, rng.randint(30, 90))} id={rng.getrandbits(40):010x} "
            f"path=/var/lib/app/{rng.choice(WORDS)}/{rng.randint(1, 999)}.dat"
        )
        lines.append(line)
        total += len(line) + 1
    if plant is None:
        return "\n".join(lines)[:size]
    lines.insert(len(lines) // 2, f"NOTE {plant.label}: {plant.value}")
    return "\n".join(lines)


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def script(turns: int, seed: int) -> list[Turn]:
    rng = random.Random(seed)
    plant_at = {10 + i * 14: Plant(*p) for i, p in enumerate(PLANTS)}  # type: ignore[arg-type]
    recall_at: dict[int, Plant] = {}
    for index, plant in plant_at.items():
        at = index + rng.randint(*RECALL_DELAY_TURNS)
        while at in recall_at or at in plant_at:
            at += 1
        recall_at[at] = plant
    out: list[Turn] = []
    clock = 0.0
    left_in_burst = 0
    for index in range(turns):
        opens_burst = left_in_burst == 0
        if opens_burst:
            clock += log_uniform(rng, *IDLE_GAP) if index else 0.0
            left_in_burst = rng.randint(*BURST_TURNS)
        else:
            clock += rng.uniform(*TYPING_GAP)
        left_in_burst -= 1
        turn = Turn(index, clock, "", rng.randint(*REPLY_CHARS), opens_burst=opens_burst)
        plant = plant_at.get(index)
        recall = recall_at.get(index)
        if recall is not None:
            turn.recall = recall
            turn.text = f"Quick one: what was {recall.label} again? I need it exactly."
        elif plant is not None and plant.via == "user":
            turn.plant = plant
            turn.text = f"Please keep this: {plant.label} is {plant.value}. {words(rng, 120)}"
        elif plant is not None or rng.random() < TOOL_SHARE:
            turn.plant = plant
            turn.tool_bytes = int(log_uniform(rng, *TOOL_BYTES))
            turn.text = f"Can you pull the {rng.choice(WORDS)} report and tell me what it says?"
        elif rng.random() < PASTE_SHARE:
            turn.text = "Have a look at this:\n" + paste(rng, rng.randint(*PASTE_CHARS))
        else:
            turn.text = words(rng, rng.randint(*USER_CHARS)).capitalize() + "?"
        out.append(turn)
    return out


# --------------------------------------------------------------------------- the fake model


def _in_place_at(body: dict[str, Any]) -> int | None:
    """The index of the message asking for an in-place summary, if the request has one."""
    for index, message in enumerate(body.get("messages") or []):
        if message.get("role") == "user" and IN_PLACE_MARK in _text(message["content"]):
            return index
    return None


def _pages_back(reply: Any) -> bool:
    """Whether the assistant answered with a read_tool_result call."""
    content = reply.content if isinstance(reply, Reply) else []
    return any(b.get("name") == "read_tool_result" for b in content)


def _turn_results(body: dict[str, Any]) -> list[str]:
    """The texts of the tool results since the person's latest message, oldest first."""
    found: list[str] = []
    for message in reversed(body.get("messages") or []):
        content = message["content"]
        if message["role"] == "assistant":
            continue
        results = [b for b in content if b.get("type") == "tool_result"]
        if not results or isinstance(content, str):
            break
        found.extend(_text(b.get("content")) for b in reversed(results))
    return found[::-1]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            parts.append(_text(block.get("content")))
    return "\n".join(parts)


@dataclass
class Model:
    """Plays the assistant from the script, and a summarizer that behaves like a decent
    model: sections, the requested identifiers (forgetting some on a first try), the ask."""

    clock: list[float]
    rng: random.Random
    forgetful: bool = False
    turn: Turn | None = None
    answered: dict[str, bool] = field(default_factory=dict)
    summaries: int = 0
    page_backs: int = 0  # read_tool_result calls: each is one more priced request

    def __call__(self, body: dict[str, Any]) -> Any:
        self.clock[0] += self.rng.uniform(*MODEL_LATENCY)
        system = _text(body.get("system"))
        if system == SUMMARIZER_SYSTEM or _in_place_at(body) is not None:
            return self.summarize(body)
        turn = self.turn
        if turn is None:
            return "NO_REPLY"
        results = _turn_results(body)
        if turn.tool_bytes and not results:
            return self.call(f"toolu_{turn.index:04d}", "fetch_report", {"turn": turn.index})
        seen = "\n".join(results)
        plant = turn.plant if turn.plant is not None and turn.plant.via == "tool" else None
        # Like a model that needs what the preview left out: the planted line, or now and
        # then just the next page.
        wanted = plant is not None and plant.value not in seen
        curious = plant is None and turn.index % PAGE_BACK_EVERY == 0 and len(results) == 1
        more = NEXT_PAGE_RE.findall(results[-1]) if results else []
        if (wanted or curious) and more:
            result_id, from_line, lines = more[-1]
            self.page_backs += 1
            page = {"id": result_id, "from_line": int(from_line), "lines": int(lines)}
            return self.call(f"toolu_{turn.index:04d}_{len(results)}", "read_tool_result", page)
        reply = words(self.rng, turn.reply_chars)
        if plant is not None and plant.value in seen:
            reply = f"The report says {plant.label} is {plant.value}. {reply}"
        if turn.recall is not None:
            found = turn.recall.value in json.dumps(body, ensure_ascii=False)
            self.answered[turn.recall.value] = found
            reply = turn.recall.value if found else "I no longer have that, sorry."
        return reply

    @staticmethod
    def call(call_id: str, name: str, tool_input: dict[str, Any]) -> Reply:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
        return Reply(content=[block], stop_reason="tool_use")

    def summarize(self, body: dict[str, Any]) -> str:
        self.summaries += 1
        messages = body["messages"]
        # In place, the summary is asked at the end of the conversation itself.
        at = _in_place_at(body)
        start = 0 if at is None else at
        prompt = _text(messages[start]["content"])
        retry = len(messages) > start + 1
        marker = "copy each one exactly under ## Exact identifiers:\n"
        required = []
        if marker in prompt:
            block = prompt.split(marker, 1)[1].split("\n\n", 1)[0]
            required = [line[2:] for line in block.splitlines() if line.startswith("- ")]
        # A first attempt forgets every fifth identifier; the retry gets them all, unless the
        # summarizer is forgetful (then it forgets them on every pass).
        forget = self.forgetful or not retry
        kept = [v for i, v in enumerate(required) if not forget or i % FORGET_EVERY != 4]
        read = prompt if at is None else "\n".join(_text(m["content"]) for m in messages[:at])
        name = KEY_USER.title()
        asks = [line.split(": ", 1)[1] for line in read.splitlines() if f"] {name}: " in line]
        digest = [f"- {ask[:160]}" for ask in asks[-40:]]
        # In place, the conversation itself shows each message under its metadata line.
        wrapped = re.findall(rf'^untrusted metadata: {{"sender":"{name}".*\n(.*)', read, re.M)
        latest = f"- {(asks or wrapped or ['none'])[-1][:160]}"
        return "\n".join(
            [
                "## Decisions",
                *digest[:-1],
                "## Open TODOs\n- follow up on the latest reports",
                "## Constraints/Rules\n- keep answers short",
                "## Pending user asks",
                latest,
                "## Exact identifiers",
                *(f"- {v}" for v in kept),
            ]
        )


# --------------------------------------------------------------------------- accounting


@dataclass
class Tally:
    requests: int = 0
    input: int = 0  # uncached input tokens
    write_5m: int = 0
    write_1h: int = 0
    read: int = 0
    output: int = 0
    max_prompt: int = 0

    def add(self, usage: dict[str, Any]) -> None:
        self.requests += 1
        creation = usage.get("cache_creation") or {}
        self.input += usage["input_tokens"]
        self.write_5m += creation.get("ephemeral_5m_input_tokens", 0)
        self.write_1h += creation.get("ephemeral_1h_input_tokens", 0)
        self.read += usage["cache_read_input_tokens"]
        self.output += usage["output_tokens"]
        prompt = (
            usage["input_tokens"]
            + usage["cache_creation_input_tokens"]
            + usage["cache_read_input_tokens"]
        )
        self.max_prompt = max(self.max_prompt, prompt)

    @property
    def prompt_tokens(self) -> int:
        return self.input + self.write_5m + self.write_1h + self.read

    @property
    def cost(self) -> float:
        return (
            self.input * INPUT_PRICE
            + self.write_5m * INPUT_PRICE * WRITE_5M
            + self.write_1h * INPUT_PRICE * WRITE_1H
            + self.read * INPUT_PRICE * READ
            + self.output * OUTPUT_PRICE
        )

    @property
    def naive_cost(self) -> float:
        return self.prompt_tokens * INPUT_PRICE + self.output * OUTPUT_PRICE

    @property
    def hit_ratio(self) -> float:
        return self.read / self.prompt_tokens if self.prompt_tokens else 0.0


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def blocks(body: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """The prompt as the cache sees it: (block key, tokens), tools -> system -> messages."""
    for tool in body.get("tools") or []:
        yield "tools", tool
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        yield "system", block
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for j, part in enumerate(parts or []):
            yield f"{message.get('role')}:{'start' if j == 0 else 'cont'}", part


class LowerBound:
    """Every block written once, then read by each later request whose prefix repeats it."""

    def __init__(self, ttl: str) -> None:
        self.ttl = ttl
        self.seen: set[bytes] = set()

    def usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, Any]:
        """The usage this request would have with the ideal cache (and remember its blocks)."""
        digest = hashlib.sha256(str(body.get("model", "")).encode())
        read = written = 0
        matching = True
        for section, part in blocks(body):
            raw = json.dumps(_strip(part), ensure_ascii=False, separators=(",", ":"))
            digest.update(f"{section}|{raw}".encode())
            digest.update(b"\x00")
            key = digest.digest()
            tokens = estimate_tokens(raw)
            if matching and key in self.seen:
                read += tokens
                continue
            matching = False
            written += tokens
            self.seen.add(key)
        return {
            "input_tokens": 0,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {f"ephemeral_{self.ttl}_input_tokens": written},
            "output_tokens": output_tokens,
        }


# --------------------------------------------------------------------------- the runs


@dataclass
class RunResult:
    tally: Tally
    answered: dict[str, bool]
    compactions: int
    summarizer_calls: int
    warm_compactions: int = 0
    overflows: int = 0  # requests the fake refused as too long
    page_backs: int = 0  # read_tool_result calls the assistant made
    page_back_cost: float = 0.0  # what the requests answered with a page-back cost
    lower: Tally = field(default_factory=Tally)
    # The first request of each burst, when the cache has (usually) expired in the gap.
    openers: Tally = field(default_factory=Tally)
    lower_openers: Tally = field(default_factory=Tally)


PIPELINE = "bot.app.ContextPipeline"


class PassThrough(ContextPipeline):
    """Run (a) and (b): requests go out as the history renders, with no pruning, no
    compaction and no overflow recovery."""

    async def prepare(self, session: Any, history: Any, messages: Any, model: Any = None) -> Any:
        return messages

    async def recover_overflow(self, session: Any, error: Any, attempt: int) -> bool:
        return False


BENCH_TOML = """
[agent]
context_window = {window}
sender_turns_per_minute = 0
{agent}
[memory]
enabled = false
[scheduler]
idle_compaction = false
"""
# The baseline reads every result whole: no tool result is kept on disk for it.
WHOLE_RESULTS_TOML = """
[tools.results]
threshold_bytes = 10000000
"""


def message(turn: Turn, now: float) -> InboundMessage:
    return InboundMessage(
        channel="local",
        message_id=f"m{turn.index}",
        chat_type=ChatType.DIRECT,
        chat_id=KEY_USER,
        user_id=KEY_USER,
        user_name=KEY_USER.title(),
        text=turn.text,
        address=Address("local", KEY_USER),
        timestamp=now,
    )


def report_tool(turns: list[Turn], seed: int) -> Tool:
    """The tool the scripted assistant calls for a turn's report."""
    by_index = {t.index: t for t in turns}

    async def fetch_report(args: dict[str, Any], ctx: Any) -> str:
        turn = by_index[int(args["turn"])]
        plant = turn.plant if turn.plant is not None and turn.plant.via == "tool" else None
        return tool_output(seed * 100_000 + turn.index, turn.tool_bytes, plant)

    schema = {"type": "object", "properties": {"turn": {"type": "integer"}}}
    return Tool("fetch_report", "Fetch a report", schema, fetch_report)


async def play(
    harness: Harness,
    turns: list[Turn],
    model: Model,
    clock: list[float],
    result: RunResult,
    *,
    pipeline: bool,
    seed: int,
    ttl: str,
    count: Callable[[Turn], None],
) -> None:
    """Send the script's turns through `krill`'s gateway one by one on the simulated clock
    (with the pre-expiry work of the idle gaps when the pipeline is on); `count` reads each
    turn's requests off the fake."""
    start = clock[0]
    wiring = contextlib.nullcontext() if pipeline else patch(PIPELINE, PassThrough)
    with wiring:
        async with harness as h:
            app = h.app
            assert app is not None
            app.tools.register(report_tool(turns, seed))
            key = f"agent:main:local:direct:{KEY_USER}"
            for turn in turns:
                if pipeline:
                    result.warm_compactions += await before_expiry(
                        h, key, clock, start + turn.at, TTL_SECONDS[ttl]
                    )
                clock[0] = max(clock[0], start + turn.at)
                model.turn = turn
                msg = message(turn, clock[0])
                await app.gateway.accept(msg)
                await app.gateway.wait_idle(msg)
                count(turn)
            session = await app.store.current_session(key)
            result.compactions = session.compaction_count if session else 0


async def replay(
    turns: list[Turn],
    *,
    pipeline: bool,
    seed: int,
    ttl: str,
    forgetful: bool = False,
    overrides: dict[str, str] | None = None,
) -> RunResult:
    start = 1_790_000_000.0  # a fixed simulated epoch keeps timestamps, and prompts, stable
    clock = [start]
    model = Model(clock, random.Random(seed), forgetful=forgetful)
    fake = FakeAnthropic(cache=CacheSimulator(clock=lambda: clock[0]))
    fake.default_handler = model
    fake.context_window = WINDOW if pipeline else None
    result = RunResult(Tally(), model.answered, 0, 0)
    lower = LowerBound(ttl) if pipeline else None  # only (c)'s requests need a bound
    async with fake:
        with tempfile.TemporaryDirectory() as tmp:
            toml = BENCH_TOML.format(window=WINDOW, agent="") + (
                "" if pipeline else WHOLE_RESULTS_TOML
            )
            harness = Harness(Path(tmp), fake.url, toml, clock=lambda: clock[0])
            harness.env["KRILL_ANTHROPIC__CACHE_TTL"] = ttl
            harness.env.update(overrides or {})

            def count(turn: Turn) -> None:
                result.overflows += sum(1 for r in fake.message_requests if r.usage is None)
                answered = [r for r in fake.message_requests if r.usage is not None]
                for position, request in enumerate(answered):
                    assert request.usage is not None
                    result.tally.add(request.usage)
                    if _pages_back(request.reply):
                        alone = Tally()
                        alone.add(request.usage)
                        result.page_back_cost += alone.cost
                    if lower is None:
                        continue
                    ideal = lower.usage(request.body, request.usage["output_tokens"])
                    result.lower.add(ideal)
                    if turn.opens_burst and position == 0:
                        result.openers.add(request.usage)
                        result.lower_openers.add(ideal)
                fake.requests.clear()

            await play(
                harness,
                turns,
                model,
                clock,
                result,
                pipeline=pipeline,
                seed=seed,
                ttl=ttl,
                count=count,
            )
    result.summarizer_calls = model.summaries
    result.page_backs = model.page_backs
    return result


async def before_expiry(
    h: Harness, key: str, clock: list[float], next_turn: float, ttl: float
) -> int:
    """What the scheduler does in an idle gap long enough for the cache to expire: at its
    pre-expiry moment, warm-compact a session past the threshold, or a smaller one when
    that is cheaper. Returns 1 if it compacted."""
    app = h.app
    assert app is not None
    session = await app.store.current_session(key)
    if session is None or session.last_model_call_at is None:
        return 0
    moment = session.last_model_call_at + ttl - IDLE_LEAD_SECONDS
    threshold = app.config.context.warm_compaction_tokens
    if next_turn <= moment or not warm_compaction_considered(session, threshold):
        return 0
    clock[0] = max(clock[0], moment)
    before = session.compaction_count
    warm = await app.lanes.run_in_lane(key, lambda: app.scheduler.idle.compact_warm(session))
    after = await app.store.current_session(key)
    return int(warm and after is not None and after.compaction_count > before)


# --------------------------------------------------------------------------- report


def row(name: str, cost: float, naive: float, tally: Tally, answered: str, *, cached: bool) -> str:
    hit = f"{tally.hit_ratio:.1%}" if cached else "-"
    return (
        f"| {name} | ${cost:,.2f} | {cost / naive:.1%} | {tally.prompt_tokens / 1e6:,.2f}M | "
        f"{hit} | {tally.requests} | {answered} |"
    )


def report(
    turns: list[Turn],
    base: RunResult,
    krill: RunResult,
    forgetful: RunResult,
    ttl: str,
    seconds: float,
) -> bool:
    naive = base.tally.naive_cost
    days = turns[-1].at / 86_400
    bursts = sum(1 for t in turns if t.opens_burst)
    tools = [t for t in turns if t.tool_bytes]
    total = len(PLANTS)

    def answered(result: RunResult) -> str:
        return f"{sum(result.answered.values())}/{total}"

    print(
        f"{len(turns)} user turns in {bursts} bursts over {days:.1f} simulated days; "
        f"{len(tools)} tool results of {min(t.tool_bytes for t in tools) / 1000:.0f}-"
        f"{max(t.tool_bytes for t in tools) / 1000:.0f} KB "
        f"({sum(t.tool_bytes for t in tools) / 1e6:.2f} MB); {total} planted identifiers; "
        f"Sonnet prices, cache TTL {ttl}.\n"
    )
    print("| run | cost | vs (a) | prompt tokens | cache hit | requests | ids answerable |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    found = answered(base)
    print(row("(a) naive: full history, no caching", naive, naive, base.tally, found, cached=False))
    print(
        row(
            "(b) caching, no pruning/compaction",
            base.tally.cost,
            naive,
            base.tally,
            found,
            cached=True,
        )
    )
    print(
        row(
            "(c) Krill pipeline", krill.tally.cost, naive, krill.tally, answered(krill), cached=True
        )
    )
    print(
        row(
            "(d) lower bound for (c)'s requests",
            krill.lower.cost,
            naive,
            krill.lower,
            "",
            cached=True,
        )
    )
    print(
        row(
            "(e) (c) with a forgetful summarizer",
            forgetful.tally.cost,
            naive,
            forgetful.tally,
            answered(forgetful),
            cached=True,
        )
    )
    share = krill.tally.cost / naive
    over = krill.tally.cost / krill.lower.cost
    all_found = sum(krill.answered.values()) == total == sum(forgetful.answered.values())
    recalled_after = sum(1 for t in turns if t.recall is not None)
    gap = krill.tally.cost - krill.lower.cost
    openers_gap = krill.openers.cost - krill.lower_openers.cost
    print()
    for name, run in (("(c)", krill), ("(e)", forgetful)):
        print(
            f"{name}: {run.compactions} compaction(s) ({run.warm_compactions} warm, "
            f"{run.compactions - run.warm_compactions} in front of a turn), "
            f"{run.summarizer_calls} summarizer call(s), {run.overflows} overflow error(s), "
            f"largest prompt {run.tally.max_prompt:,} tokens; {run.page_backs} page-back "
            f"call(s) (read_tool_result) costing ${run.page_back_cost:.2f}."
        )
    print(f"baseline largest prompt: {base.tally.max_prompt:,} tokens; {recalled_after} recalls.")
    print(
        f"(c) - (d) = ${gap:.2f}, of which ${openers_gap:.2f} on the first request of each "
        f"burst (the cache expired during the idle gap; (d) never expires)."
    )
    print(f"(c) is {share:.2%} of (a) (target <= {TARGET_SHARE_OF_NAIVE:.1%})")
    print(f"(c) is {over:.2f}x (d) (target <= {TARGET_OVER_LOWER_BOUND}x)")
    print(
        f"identifiers answerable with Krill: {answered(krill)}, with the forgetful "
        f"summarizer: {answered(forgetful)} (target {total}/{total})"
    )
    print(f"ran in {seconds:.0f}s")
    no_overflow = krill.overflows == forgetful.overflows == 0
    return (
        share <= TARGET_SHARE_OF_NAIVE
        and over <= TARGET_OVER_LOWER_BOUND
        and all_found
        and (no_overflow)
    )


# --------------------------------------------------------------------------- OpenAI-compatible


def anthropic_view(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request read back as the Anthropic request it was translated from
    (system, text and tool blocks), so the same scripted model answers both fakes."""
    system = ""
    messages: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        role, content = message["role"], message.get("content") or ""
        text = content if isinstance(content, str) else _text(content)
        if role == "system":
            system = text
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            result["content"] = text
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or []:
                function = call["function"]
                block = {"type": "tool_use", "id": call["id"], "name": function["name"]}
                blocks.append(block | {"input": json.loads(function["arguments"])})
            messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
    return {"system": system, "messages": messages}


def chat_reply(reply: Any) -> Any:
    """The scripted model's answer as the OpenAI fake sends it."""
    if isinstance(reply, Reply):
        calls = [(b["name"], b["input"], b["id"]) for b in reply.content if "input" in b]
        text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
        return ChatReply(text=text, tool_calls=calls)
    return reply


def openai_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's usage in the shape `Tally` counts: cached prompt tokens are cache reads."""
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    return {
        "input_tokens": usage["prompt_tokens"] - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": usage["completion_tokens"],
    }


def openai_cost(tally: Tally, *, cached: bool = True) -> float:
    price_in, price_cached, price_out = OPENAI_PRICES
    if not cached:
        return tally.prompt_tokens * price_in + tally.output * price_out
    return tally.input * price_in + tally.read * price_cached + tally.output * price_out


async def replay_openai(turns: list[Turn], *, pipeline: bool, seed: int) -> RunResult:
    """(b) or (c) against the fake OpenAI-compatible server."""
    start = 1_790_000_000.0
    clock = [start]
    model = Model(clock, random.Random(seed))
    fake = FakeOpenAI(
        models={OPENAI_MODEL: ModelSpec(context_window=OPENAI_WINDOW if pipeline else 10**9)},
        cache=PrefixCache(clock=lambda: clock[0]),
    )
    fake.default_handler = lambda body: chat_reply(model(anthropic_view(body)))
    result = RunResult(Tally(), model.answered, 0, 0)
    async with fake:
        with tempfile.TemporaryDirectory() as tmp:
            toml = (
                BENCH_TOML.format(window=OPENAI_WINDOW, agent=f'model = "bench:{OPENAI_MODEL}"')
                + f'[providers.bench]\nkind = "openai"\nbase_url = "{fake.url}"\n'
                + 'api_key = "sk-test"\nmax_retries = 0\n'
                + ("" if pipeline else WHOLE_RESULTS_TOML)
            )
            harness = Harness(Path(tmp), "http://127.0.0.1:9", toml, clock=lambda: clock[0])

            def count(turn: Turn) -> None:
                result.overflows += sum(1 for r in fake.chat_requests if r.usage is None)
                for request in fake.chat_requests:
                    if request.usage is not None:
                        result.tally.add(openai_usage(request.usage))
                fake.requests.clear()

            # The same idle-gap work as against Anthropic, at its default 5-minute TTL.
            await play(
                harness,
                turns,
                model,
                clock,
                result,
                pipeline=pipeline,
                seed=seed,
                ttl="5m",
                count=count,
            )
    result.summarizer_calls = model.summaries
    return result


def report_openai(turns: list[Turn], base: RunResult, krill: RunResult) -> bool:
    total = len(PLANTS)
    naive = openai_cost(base.tally, cached=False)
    print(
        f"\nThe same script against the OpenAI-compatible fake ({OPENAI_WINDOW // 1000}k window, "
        "automatic prefix caching, gpt-4.1 prices):\n"
    )
    print("| run | cost | vs (a) | prompt tokens | cached | requests | ids answerable |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    runs = (
        ("(a) naive: full history, no caching", base, naive, False),
        ("(b) prefix caching, no pruning/compaction", base, openai_cost(base.tally), True),
        ("(c) Krill pipeline", krill, openai_cost(krill.tally), True),
    )
    for name, run, cost, cached in runs:
        hit = f"{run.tally.hit_ratio:.1%}" if cached else "-"
        print(
            f"| {name} | ${cost:,.2f} | {cost / naive:.1%} | "
            f"{run.tally.prompt_tokens / 1e6:,.2f}M | {hit} | {run.tally.requests} | "
            f"{sum(run.answered.values())}/{total} |"
        )
    print(
        f"\n(c): {krill.compactions} compaction(s) ({krill.warm_compactions} warm), "
        f"{krill.summarizer_calls} summarizer "
        f"call(s), {krill.overflows} overflow error(s), largest prompt "
        f"{krill.tally.max_prompt:,} tokens."
    )
    return sum(krill.answered.values()) == total and krill.overflows == 0


def setting_env(setting: str) -> tuple[str, str]:
    """`tools.results.threshold_bytes=16000` as the KRILL_* variable that sets it."""
    key, _, value = setting.partition("=")
    return "KRILL_" + key.upper().replace(".", "__"), value


async def main_async(args: argparse.Namespace) -> int:
    global WORDS
    if args.cjk:
        WORDS = CJK_WORDS
    turns = script(args.turns, args.seed)
    started = time.monotonic()
    overrides = dict(setting_env(s) for s in args.set)
    ok = True
    if args.provider in ("openai", "both"):
        open_base = await replay_openai(turns, pipeline=False, seed=args.seed)
        open_krill = await replay_openai(turns, pipeline=True, seed=args.seed)
        ok = report_openai(turns, open_base, open_krill)
    if args.provider == "openai":
        return 0 if ok else 1
    base = await replay(turns, pipeline=False, seed=args.seed, ttl=args.cache_ttl)
    krill = await replay(
        turns, pipeline=True, seed=args.seed, ttl=args.cache_ttl, overrides=overrides
    )
    forgetful = await replay(
        turns,
        pipeline=True,
        seed=args.seed,
        ttl=args.cache_ttl,
        forgetful=True,
        overrides=overrides,
    )
    ok = report(turns, base, krill, forgetful, args.cache_ttl, time.monotonic() - started) and ok
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=320)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-ttl", choices=("5m", "1h"), default="5m")
    parser.add_argument("--cjk", action="store_true", help="replay the script in Chinese")
    parser.add_argument("--provider", choices=("anthropic", "openai", "both"), default="both")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="run Krill with this setting instead of its default (repeatable), e.g. "
        "context.keep_recent_user_turns=2",
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
