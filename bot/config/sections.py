"""The general configuration sections: agent, model provider, workspace, storage, server,
admin, logging, sessions, context management, memory and scheduler.

Every default lives here, beside its key.
"""

from __future__ import annotations

import re
from ipaddress import ip_network
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, IPvAnyNetwork, field_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class AgentConfig(Section):
    model: str = "claude-sonnet-4-6"
    # Ids /model may switch a session to; empty = only `model`.
    models: list[str] = Field(default_factory=list)
    max_tokens: int = Field(4096, gt=0)
    context_window: int = Field(200_000, gt=1000)
    timezone: str = "UTC"
    max_tool_iterations: int = Field(12, gt=0)
    max_concurrent_turns: int = Field(8, gt=0)  # turns building requests and calling the model
    # Tool calls running at once across all turns; a turn gives its slot up while its tools run.
    max_concurrent_tools: int = Field(16, gt=0)
    queue_cap: int = Field(20, gt=0)  # messages merged into one follow-up turn at most
    # Model turns one sender may start per minute; beyond it their messages wait and merge
    # into the next turn. 0 = no cap.
    sender_turns_per_minute: int = Field(20, ge=0)
    # Models tried in order, within the same turn, when the session's model is overloaded
    # (529), rate-limited for longer than `fallback_after_seconds`, failing with 5xx after
    # its retries, or unreachable; any provider's ids. A failed model is skipped for
    # `fallback_cooldown_seconds`, then tried first again.
    fallback_models: list[str] = Field(default_factory=list)
    fallback_after_seconds: float = Field(20.0, ge=0)
    fallback_cooldown_seconds: float = Field(60.0, ge=0)
    fallback_notice: bool = True  # a line under a reply a fallback model wrote, saying so


class AnthropicConfig(Section):
    api_key: str = ""
    base_url: str = ""
    cache_ttl: Literal["5m", "1h"] = "5m"
    max_retries: int = Field(2, ge=0)
    timeout: float = Field(600.0, gt=0)


class WorkspaceConfig(Section):
    # Under the data folder: the repository's `workspace/` is the template it is copied from.
    path: str = "data/workspace"
    file_max_chars: int = Field(20_000, gt=100)
    total_max_chars: int = Field(60_000, gt=100)


# The most pixels `media.max_pixels` may allow, and Pillow's own limit for every image the
# process opens (a 10000x10000 picture, 400 MB decoded).
MAX_PIXELS_CEILING = 100_000_000


class MediaConfig(Section):
    """Photos, files and voice notes people send (docs/contracts.md section 9)."""

    enabled: bool = True
    # Larger files are never downloaded: the person is told the limit and the model a note.
    max_bytes: int = Field(20_000_000, gt=0)
    # Images with more pixels (width x height, read from the file's header) are refused
    # before decoding; decoding costs about 4 bytes a pixel (160 MB at the default).
    max_pixels: int = Field(40_000_000, gt=0, le=MAX_PIXELS_CEILING)
    image_max_edge: int = Field(1568, ge=64)  # long side of images sent to the model
    keep_images_turns: int = Field(3, ge=0)  # older images become placeholders once cold
    text_max_chars: int = Field(50_000, gt=0)  # text files and transcripts past this are cut


class TranscriptionConfig(Section):
    """An OpenAI-compatible speech-to-text endpoint: POST {base_url}/audio/transcriptions."""

    base_url: str = ""  # empty: voice notes reach the model as a note saying so
    api_key: str = ""  # TRANSCRIPTION_API_KEY
    model: str = "whisper-1"
    timeout: float = Field(60.0, gt=0)


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class StorageConfig(Section):
    # sqlite:///path (relative to the config file) or postgresql://user:pass@host/db,
    # which several replicas may share.
    url: str = "sqlite:///data/krill.db"
    # Finished inbound and dedupe rows, delivered outbox rows and old (non-current) sessions
    # with their transcripts are pruned once older than this; 0 keeps everything forever.
    retention_days: float = Field(0, ge=0)
    # How long a write waits for a database another process has locked before the turn
    # gives up (the person is told; the message stays unanswered for the next start).
    busy_wait_seconds: float = Field(60.0, gt=0)
    # A session's turn holds a lease row this long, renewed while it runs; a process that
    # dies leaves its sessions to be taken over once their leases expire.
    lease_seconds: float = Field(15.0, gt=0)
    # The outbox's wait before retrying a chunk after a server or network failure: doubling
    # from the first delay up to the cap, with jitter. Flood control's own delay is always
    # honoured as the platform names it.
    outbox_retry_first_seconds: float = Field(1.0, gt=0)
    outbox_retry_max_seconds: float = Field(300.0, gt=0)
    # How often the outbox sender looks for rows other processes sharing the store wrote
    # (its own rows wake it at once).
    outbox_poll_seconds: float = Field(1.0, gt=0)
    # How long start-up keeps trying a PostgreSQL server that does not answer.
    connect_wait_seconds: float = Field(30.0, gt=0)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not url.startswith(("sqlite:///", *POSTGRES_SCHEMES)):
            raise ValueError(
                "must start with sqlite:/// (a file) or postgresql:// (a server), "
                f"got {url.split('://')[0]}://…"
            )
        return url


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)
    # Host names accepted for /, /api, /ws and /admin besides loopback (DNS-rebinding guard).
    allowed_hosts: list[str] = Field(default_factory=list)
    # Seconds without a successful poll (Telegram) or pong (Slack) before /healthz says 503.
    health_stale_after: float = Field(90.0, gt=0)
    # Reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or
    # networks): who the client is for the wrong-token limits, and HTTPS for Secure cookies.
    trusted_proxies: list[IPvAnyNetwork] = Field(
        default_factory=lambda: [ip_network("127.0.0.0/8"), ip_network("::1")]
    )


# A shorter console token is refused at start: the wrong-token limits never lock out the
# right token, so its length is what makes guessing it hopeless.
CONSOLE_TOKEN_MIN_CHARS = 24


class AdminConfig(Section):
    users: list[str] = Field(default_factory=list)
    # The local channel is the host's own terminal and web chat; its users run admin
    # commands unless the operator turns that off.
    local_is_admin: bool = True
    # Required for the operator console at /admin (KRILL_ADMIN_TOKEN); empty keeps it off.
    # At least CONSOLE_TOKEN_MIN_CHARS long (checked once the environment is merged in).
    console_token: str = ""


class LoggingConfig(Section):
    format: Literal["text", "json"] = "text"  # json: one object a line, with turn_id/session_key
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    file: str = ""  # empty: stderr
    include_content: bool = False  # message bodies in log lines (and library DEBUG dumps)

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, level: object) -> object:
        return level.upper() if isinstance(level, str) else level


def duration_seconds(text: str) -> float:
    """A duration such as "90s", "30m", "24h" or "2d" (a bare number is seconds)."""
    match = _DURATION_RE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"{text!r} is not a duration like '90s', '30m', '24h' or '2d'")
    return float(match[1]) * _DURATION_UNITS[match[2] or "s"]


def _positive(value: str) -> str:
    if duration_seconds(value) <= 0:
        raise ValueError("must be longer than zero")
    return value


# A duration key ("90s", "30m", "24h", "2d"), longer than zero; read it with duration_seconds.
Duration = Annotated[str, AfterValidator(_positive)]

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CLOCK_RE = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


class SessionResetConfig(Section):
    """Automatic fresh sessions (`[session.reset]`): after `idle_after` of silence, or at
    the first message past `at` each day (in agent.timezone)."""

    mode: Literal["off", "idle", "daily"] = "off"
    idle_after: Duration = "24h"
    at: str = "04:00"

    @field_validator("at")
    @classmethod
    def _clock(cls, value: str) -> str:
        if _CLOCK_RE.fullmatch(value.strip()) is None:
            raise ValueError(f"{value!r} is not a time of day like '04:00'")
        return value.strip()

    @property
    def idle_seconds(self) -> float:
        return duration_seconds(self.idle_after)

    @property
    def hour_minute(self) -> tuple[int, int]:
        hour, minute = self.at.split(":")
        return int(hour), int(minute)


class SessionConfig(Section):
    dm_scope: Literal["main", "per-peer", "per-channel-peer"] = "per-channel-peer"
    identity_links: dict[str, list[str]] = Field(default_factory=dict)
    reset: SessionResetConfig = Field(default_factory=SessionResetConfig)
    # Where /reset and /new in a session with more than a few turns ask "are you sure?"
    # with buttons first: "groups" (groups and channels), "always", or "off".
    confirm_reset: Literal["off", "groups", "always"] = "groups"

    @field_validator("identity_links")
    @classmethod
    def _qualified_links(cls, links: dict[str, list[str]]) -> dict[str, list[str]]:
        # A bare id would also match a local web user who picks that id as a name.
        for name, entries in links.items():
            for entry in entries:
                channel, _, user = entry.partition(":")
                if not channel.strip() or not user.strip():
                    raise ValueError(
                        f"{name}: {entry!r} must name its channel, e.g. 'telegram:{entry}'"
                    )
        return links


class ContextConfig(Section):
    """Context management (docs/contracts.md section 6); ratios are shares of
    agent.context_window."""

    reserve_tokens: int = Field(20_000, ge=0)  # compact when context > window - reserve
    # A smaller reserve is raised to this (with a warning in the log and `krill doctor`):
    # below it a reply, a tool result or the summary request itself no longer fits.
    reserve_tokens_floor: int = Field(20_000, ge=0)
    # Kept verbatim by compaction (fewer when they would fill half the room); 2 measured
    # cheapest without losing identifiers (bench/cost.py).
    keep_recent_user_turns: int = Field(2, ge=1)
    # Single tool-result cap (in memory only; the transcript keeps the original).
    tool_result_max_share: float = Field(0.3, gt=0, le=1)
    tool_result_max_chars: int = Field(400_000, gt=0)
    # Cache-TTL pruning: only once the prompt cache has expired.
    prune_soft_ratio: float = Field(0.3, ge=0, le=1)  # soft-trim above this share
    prune_hard_ratio: float = Field(0.5, ge=0, le=1)  # hard-clear above this share...
    prune_min_prunable_chars: int = Field(50_000, ge=0)  # ...with at least this much prunable
    prune_soft_trim_min_chars: int = Field(4_000, gt=0)  # results longer than this are trimmed
    prune_head_chars: int = Field(1_500, ge=0)
    prune_tail_chars: int = Field(1_500, ge=0)
    prune_keep_last_assistants: int = Field(3, ge=0)  # their tool results are never pruned
    prune_tools_allow: list[str] = Field(default_factory=lambda: ["*"])  # globs; deny wins
    prune_tools_deny: list[str] = Field(default_factory=list)
    # Compaction: staged summaries with a quality guard.
    chunk_max_share: float = Field(0.4, gt=0, le=1)  # a summary chunk's share of the window
    chunk_min_share: float = Field(0.15, gt=0, le=1)  # ...shrinking to this for big messages
    summary_retries: int = Field(1, ge=0, le=3)  # quality retries with feedback
    # After this many failed compactions in a row a session stops trying for a while (5
    # minutes, doubling to an hour); its requests are kept under the window meanwhile.
    compaction_max_failures: int = Field(3, ge=1)
    # One whole compaction (every summarizer call) may take this long; past it, it is
    # cancelled, counted as failed, and the turn goes on.
    compaction_timeout_seconds: float = Field(120.0, gt=0)
    # Shortly before an idle session's prompt cache expires, compact it when its context is
    # at least this large, while the summary can still read the cache; 0 turns it off.
    warm_compaction_tokens: int = Field(30_000, ge=0)

    @property
    def reserve(self) -> int:
        """The reserve every threshold uses: `reserve_tokens`, never below the floor."""
        return max(self.reserve_tokens, self.reserve_tokens_floor)


class MemoryFlushConfig(Section):
    """The silent turn that stores durable facts before compaction and before the cache expires."""

    enabled: bool = True
    # Flush once the context reaches window - context.reserve_tokens - this.
    soft_threshold_tokens: int = Field(4_000, ge=0)
    idle: bool = True  # also flush idle sessions from the scheduler, while the cache is warm
    idle_lead_seconds: float = Field(30.0, ge=0)  # how long before the cache TTL runs out
    timeout_seconds: float = Field(120.0, gt=0)  # a flush never holds a person's turn longer


class MemorySearchConfig(Section):
    max_results: int = Field(6, ge=1, le=50)
    min_score: float = Field(0.3, ge=0, le=1)  # share of the query's terms a snippet must hold
    recall: bool = True  # attach the top snippets to every person's turn
    snippet_max_chars: int = Field(700, ge=100)
    recall_max_chars: int = Field(3_000, ge=200)  # all recalled snippets of one turn together


class MemoryEmbeddingsConfig(Section):
    """Optional embeddings from an OpenAI-compatible `/embeddings` endpoint for hybrid ranking
    (BM25 + vector); unset or failing, search is keyword-only."""

    base_url: str = ""  # e.g. "https://api.openai.com/v1"; "" turns embeddings off
    api_key: str = ""  # or EMBEDDINGS_API_KEY
    model: str = "text-embedding-3-small"
    timeout_seconds: float = Field(10.0, gt=0)
    vector_weight: float = Field(0.7, ge=0, le=1)  # the vector's share of a hit's score
    recent_chunks: int = Field(200, ge=0)  # newest chunks ranked by vector besides keyword hits


class MemoryConfig(Section):
    enabled: bool = True
    chunk_tokens: int = Field(400, ge=50)
    chunk_overlap_tokens: int = Field(80, ge=0)
    reindex_interval_seconds: float = Field(60.0, ge=0)  # 0: only the check before each search
    append_max_chars: int = Field(4_000, gt=0)  # one memory_append entry
    file_max_bytes: int = Field(1_000_000, gt=0)  # memory_append refuses to grow a file past it
    flush: MemoryFlushConfig = Field(default_factory=MemoryFlushConfig)
    search: MemorySearchConfig = Field(default_factory=MemorySearchConfig)
    embeddings: MemoryEmbeddingsConfig = Field(default_factory=MemoryEmbeddingsConfig)


class SchedulerConfig(Section):
    """Timed housekeeping: idle compaction, the heartbeat, and test-only timing overrides."""

    heartbeat_minutes: float = Field(0.0, ge=0)  # 0 turns the heartbeat off
    heartbeat_session: str = ""  # session key; "" = the most recently active DM session
    idle_compaction: bool = True  # compact idle sessions (warm, and large ones once cold)
    # Overrides the TTL implied by anthropic.cache_ttl (tests use seconds); read it only
    # through `Config.cache_ttl_seconds`.
    cache_ttl_seconds: float | None = Field(None, gt=0)
    # Tests only: shifts the service's clock (reminders, resets, flush timing) this many
    # seconds ahead of the wall clock, so a test can start Krill "later" without waiting.
    clock_offset_seconds: float = 0.0


class ButtonsConfig(Section):
    """Choices offered with buttons (`[buttons]`)."""

    # A choice nobody answered within this loses its buttons; a later press of one is told
    # it expired. Approvals of tool calls have their own, shorter tools.policy.confirm_timeout.
    expire_after: Duration = "1d"

    @property
    def expire_seconds(self) -> float:
        return duration_seconds(self.expire_after)


class RemindersConfig(Section):
    """Reminders the model sets with reminder_create."""

    max_pending_per_person: int = Field(20, gt=0)


class SchedulesConfig(Section):
    """Recurring jobs people set up with schedule_create (docs/contracts.md section 15)."""

    # Runs missed while Krill was down: "once" runs the job once for all of them, naming
    # the time it was for; "skip" waits for the next due time.
    catch_up: Literal["once", "skip"] = "once"
    max_per_chat: int = Field(10, gt=0)  # jobs (active or paused) in one chat, threads included
    max_per_person: int = Field(20, gt=0)  # jobs one person set up, everywhere
    min_interval_minutes: int = Field(15, ge=1)  # the shortest time between two runs
    # Who may set up jobs in groups and channels besides admins (`<channel>:<user_id>`);
    # in their own DMs everyone allowed to talk to the bot may.
    group_creators: list[str] = Field(default_factory=list)
