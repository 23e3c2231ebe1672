"""The composition root: builds every collaborator through its constructor, in dependency
order, and starts and stops them.

`async with App(config) as app:` starts the components one by one through a `Lifespan`, each
registering its stop as it starts, so they stop in reverse order by construction, and a
start that fails halfway stops what had started. Background work (the scheduler, the
MCP servers and the platform channels) starts only when `background` is set, which `krill
run` does (bot/cli/service.py, with signal handling) and `krill chat` and the other CLI
commands do not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from aiohttp import web

from bot.agent.accounting import UsageAccountant
from bot.agent.cache_breaks import CacheWatch
from bot.agent.loop import AgentLoop
from bot.agent.model import ModelClient
from bot.agent.prefix import RequestPrefixes
from bot.agent.pricing import PriceList, require_prices
from bot.agent.runner import AgentRunner
from bot.agent.workspace import Workspace
from bot.app_buttons import presses_for
from bot.app_scheduler import scheduler_for
from bot.buttons.approvals import Approvals
from bot.buttons.ask import AskChoiceTool
from bot.buttons.offers import Offers
from bot.channel_contract import (
    Channel,
    ChannelHealth,
    ChannelSpec,
    StateChanges,
    channel_health,
    failing_since,
)
from bot.config import Config
from bot.console.routes import console_routes
from bot.context.pipeline import ContextPipeline
from bot.context.planned import PlannedRequests
from bot.gateway.admission import Admission, warn_if_closed
from bot.gateway.lanes import Lanes
from bot.gateway.leases import SessionLeases, gone_from_this_host, new_holder_id
from bot.gateway.replies import Replies
from bot.gateway.service import GatewayService
from bot.gateway.session_commands import SessionCommands
from bot.lifespan import Lifespan
from bot.media.files import MediaFiles
from bot.media.prepare import MediaPreparer
from bot.media.transcribe import Transcriber
from bot.memory.access import readable
from bot.memory.flush_service import FlushService
from bot.memory.fresh_start import FreshStart
from bot.memory.index import MemoryIndex
from bot.memory.recall import Recall
from bot.memory.tools import MemoryTools
from bot.metrics import Metrics
from bot.outbox.sender import Sender
from bot.outbox.writer import Outbox
from bot.scheduler.jobs import Jobs
from bot.scheduler.reminder_tools import ReminderTools
from bot.scheduler.reminders import Reminders
from bot.scheduler.schedule_timers import ScheduleTimers
from bot.scheduler.schedule_tools import ScheduleTools
from bot.scheduler.schedules import Schedules
from bot.server import build_server, listen
from bot.sessions.slots import TurnSlots
from bot.skills.catalog import SkillCatalog
from bot.skills.tool import SkillReadTool
from bot.spending.guard import SpendingGuard
from bot.startup import listen_failed, open_store, prepare_workspace, warn_of_settings
from bot.store.base import Store
from bot.store.factory import store_for
from bot.tools.mcp import McpManager
from bot.tools.registry import ToolRegistry
from bot.tools.results import ResultProcessor, ResultStore
from bot.tools.send_file import SendFileTool
from bot.tools.web_fetch import WebFetcher, WebFetchTool
from bot.tools.web_search import web_search_tool
from channels.registry import CHANNELS

log = logging.getLogger(__name__)


class App:
    def __init__(
        self,
        config: Config,
        *,
        with_server: bool = True,
        recover: bool = True,
        background: bool = False,
        clock: Callable[[], float] = time.time,
        channels: Sequence[ChannelSpec[Any]] = CHANNELS,
    ):
        self.config = config
        # The channels it may run: the registry (tests add one of their own).
        self.channel_specs = channels
        self.with_server = with_server
        self.recover = recover
        self.background = background
        self.metrics = Metrics()
        self.store: Store = store_for(config)
        self.model = ModelClient(config, state=self.store, metrics=self.metrics, clock=clock)
        # Skills are read from the workspace on every turn, like its other files.
        self.skills = SkillCatalog(config.workspace_dir)
        self.workspace = Workspace(
            config.workspace_dir,
            file_max_chars=config.workspace.file_max_chars,
            total_max_chars=config.workspace.total_max_chars,
            skills=self.skills,
        )
        self.channels: dict[str, Channel] = {}
        # Every reply is written to the outbox; the sender delivers it (and what an earlier
        # run left there) on whichever of these channels is up.
        self.outbox = Outbox(store=self.store, channels=self.channels, clock=clock)
        # This process's name on the session leases and outbox claims it holds.
        holder = new_holder_id()
        self.sender = Sender(
            store=self.store,
            channels=self.channels,
            wakeup=self.outbox.wakeup,
            metrics=self.metrics,
            holder=holder,
            claim_seconds=config.storage.lease_seconds,
            poll_seconds=config.storage.outbox_poll_seconds,
            gone=gone_from_this_host,
            retry_first=config.storage.outbox_retry_first_seconds,
            retry_cap=config.storage.outbox_retry_max_seconds,
            clock=clock,
        )

        # Choices offered with buttons: a row each, then the message in the outbox.
        offers = Offers(
            config=config, store=self.store, outbox=self.outbox, channels=self.channels, clock=clock
        )
        # Tools: large results are kept on disk and read back with read_tool_result. Every
        # tool that reads a workspace path asks `readable` which files its session may read.
        # A call [tools.policy] marks confirm is offered for approval instead of run.
        self.results = ResultStore(self.workspace.path, config.tools.results)
        processor = ResultProcessor(self.results, readable)
        self.tools = ToolRegistry(
            result_hook=processor.process, confirm_hook=Approvals(config=config, offers=offers).ask
        )
        self.tools.register(processor.read_tool())
        AskChoiceTool(offers).register(self.tools)
        self.tools.register(WebFetchTool(WebFetcher(config.tools.web_fetch)).tool())
        search = web_search_tool(config.tools.web_search)
        if search is not None:
            self.tools.register(search)
        SendFileTool(self.channels, self.outbox, readable).register(self.tools)
        SkillReadTool(self.skills).register(self.tools)
        self.mcp = McpManager(config, self.tools)

        # Every model call goes through the one loop (turns, heartbeats, flushes) and is
        # counted by the one accountant (those and compaction's summaries).
        cache_watch = CacheWatch(
            metrics=self.metrics, ttl_seconds=config.cache_ttl_seconds, clock=clock
        )
        self.accountant = UsageAccountant(
            config=config,
            store=self.store,
            metrics=self.metrics,
            prices=PriceList.of(config),
            clock=clock,
            cache_watch=cache_watch,
        )
        # Turns share the global turn slots, given back while their tools run.
        slots = TurnSlots(
            turns=config.agent.max_concurrent_turns, tools=config.agent.max_concurrent_tools
        )
        self.loop = AgentLoop(
            model=self.model, tools=self.tools, cache_watch=cache_watch, slots=slots
        )

        # Media people send: stored under the data folder, images prepared on acceptance.
        self.media_files = MediaFiles(config.media_dir)
        media = (
            MediaPreparer(config.media, self.media_files, Transcriber(config.transcription))
            if config.media.enabled
            else None
        )
        # Requests as each session's stored context plan shapes them, and the prefix its
        # prompt cache holds, for the flush and warm compaction to read.
        requests = PlannedRequests(config=config, store=self.store, media=self.media_files)
        prefixes = RequestPrefixes(
            config=config,
            store=self.store,
            workspace=self.workspace,
            tools=self.tools,
            requests=requests,
        )

        # Memory: the index and its tools, per-turn recall, and the flush.
        memory = config.memory
        self.index: MemoryIndex | None = None
        recall: Recall | None = None
        self.flusher: FlushService | None = None
        if memory.enabled:
            self.index = MemoryIndex(self.store, config.workspace_dir, memory)
            MemoryTools(self.index, memory, config.agent.timezone).register(self.tools)
            if memory.search.recall:
                recall = Recall(self.index, memory.search, config.admin)
            if memory.flush.enabled:
                self.flusher = FlushService(
                    config=config,
                    store=self.store,
                    loop=self.loop,
                    accountant=self.accountant,
                    workspace=self.workspace,
                    prefixes=prefixes,
                    clock=clock,
                )
        flushers = [self.flusher] if self.flusher is not None else []

        self.context = ContextPipeline(
            config=config,
            store=self.store,
            model=self.model,
            workspace=self.workspace,
            tools=self.tools,
            accountant=self.accountant,
            before_compaction=flushers,
            clock=clock,
            requests=requests,
            failures=self.metrics.compaction_failures,
        )
        self.replies = Replies(self.channels, self.outbox)
        self.runner = AgentRunner(
            config=config,
            store=self.store,
            loop=self.loop,
            accountant=self.accountant,
            workspace=self.workspace,
            tools=self.tools,
            channels=self.channels,
            outbox=self.outbox,
            metrics=self.metrics,
            recall=recall,
            before_turn=flushers,
            context=self.context,
            media=media,
            session_start=FreshStart(
                config=config,
                store=self.store,
                model=self.model,
                charger=self.accountant,
                flusher=self.flusher,
                clock=clock,
            ),
            notify=self.replies.send_now,
            clock=clock,
        )
        self.leases = SessionLeases(self.store, holder=holder, seconds=config.storage.lease_seconds)
        # The caps each turn is admitted under; background work asks it through the lanes.
        spending = SpendingGuard(
            config=config, store=self.store, replies=self.replies, holder=holder, clock=clock
        )
        self.lanes = Lanes(
            config=config,
            runner=self.runner,
            spending=spending,
            leases=self.leases,
            inbound=self.store,
            budgets=self.store,
            channels=self.channels,
            metrics=self.metrics,
            slots=slots,
        )
        jobs = Jobs(clock)
        self.reminders = Reminders(
            config=config,
            store=self.store,
            jobs=jobs,
            lanes=self.lanes,
            runner=self.runner,
            offers=offers,
        )
        ReminderTools(self.reminders).register(self.tools)
        timers = ScheduleTimers(
            config, self.store, jobs, self.lanes, self.runner, self.replies, offers
        )
        self.schedules = Schedules(config, self.store, clock, on_change=timers.arm)
        ScheduleTools(self.schedules, self.store).register(self.tools)
        self.scheduler = scheduler_for(
            self, jobs=jobs, prefixes=prefixes, timers=timers, clock=clock
        )
        commands = SessionCommands(
            config=config,
            store=self.store,
            lanes=self.lanes,
            model_configured=self.model.configured,
            tools=self.tools,
            skills=self.skills,
            compactor=self.context,
            before_reset=self.flusher,
            jobs=self.schedules,
            # MCP servers run only with the background work; elsewhere they have no status.
            status_sources=(
                [self.mcp, self.scheduler, self.sender]
                if background
                else [self.scheduler, self.sender]
            ),
            offers=offers,
        )
        self.presses = presses_for(
            self, commands=commands, activity=self.scheduler, jobs=jobs, clock=clock
        )
        self.gateway = GatewayService(
            config=config,
            store=self.store,
            lanes=self.lanes,
            admission=Admission(config=config, store=self.store, replies=self.replies, media=media),
            commands=commands,
            replies=self.replies,
            delivered=self.sender,
            activity=self.scheduler,
            metrics=self.metrics,
            holder=self.leases.holder,
            offers=offers,
            presses=self.presses,
            media=media,
        )
        self._ready: dict[str, bool] = {}
        self._states = StateChanges()
        self._runner: web.AppRunner | None = None
        self.lifespan = Lifespan()
        self.server_url = ""

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.name] = channel
        self._ready[channel.name] = False

    async def __aenter__(self) -> App:
        """Start every component in order. A start that fails stops what had started, in
        reverse, before the error goes on."""
        try:
            await self._start()
        except BaseException:
            await self.lifespan.close()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop every started component, the last started first."""
        await self.lifespan.close()

    async def _start(self) -> None:
        require_prices(self.config)  # before anything is counted against a cap
        prepare_workspace(self.config)
        await self.lifespan.start(
            "store", partial(open_store, self.store, self.config), self.store.close
        )
        await self.lifespan.start("model client", None, self.model.close)
        warn_of_settings(self.config, model_configured=self.model.configured)
        await self.leases.release_dead()  # before any work can wait for those leases
        for spec in self.channel_specs:
            wanted = (self.with_server or not spec.needs_server) and (
                self.background or not spec.background
            )
            channel = spec.create_enabled(self.config, self.gateway) if wanted else None
            if channel is not None:
                self.add_channel(channel)
        warn_if_closed(self.config, self.channels)
        if self.background:
            await self.lifespan.start("MCP servers", self._start_mcp, self.mcp.stop)
            await self.lifespan.start("scheduler", self.scheduler.start, self.scheduler.stop)
        await self.lifespan.start("gateway", self._recover, self.gateway.close)
        if self.with_server:
            await self.lifespan.start("server", self._start_server, self._stop_server)
        for name, channel in self.channels.items():
            await self.lifespan.start(
                f"channel {name}", partial(self._start_channel, name), channel.stop
            )
        await self.lifespan.start("outbox sender", self.sender.start, self.sender.stop)

    async def _start_mcp(self) -> None:
        self.mcp.start()  # connects in the background; never holds up start-up

    async def _recover(self) -> None:
        if self.recover:
            # Read before any channel can accept a message: one accepted during start-up is
            # queued by `accept` already and must not be queued a second time as
            # "unanswered". Queued before any channel can queue a newer message of the same
            # chat behind which they would otherwise be answered, out of order.
            recovered = await self.gateway.recover(await self.store.unfinished_inbound())
            if recovered:
                log.info("answering %d message(s) accepted before the last shutdown", recovered)
        if self.background:  # presses come only from the channels krill run starts
            await self.presses.start()

    async def _start_channel(self, name: str) -> None:
        await self.channels[name].start()
        self._ready[name] = True
        self._health()  # the time it came up
        log.info("channel %s is up", name)

    def _health(self) -> dict[str, ChannelHealth]:
        return self._states.look(
            {name: channel_health(self.channels[name], up) for name, up in self._ready.items()},
            {name: failing_since(self.channels[name]) for name in self._ready},
        )

    async def _start_server(self) -> None:
        routes = [route for channel in self.channels.values() for route in channel.routes()]
        routes += console_routes(
            config=self.config,
            store=self.store,
            workspace=self.workspace,
            index=self.index,
            control=self.gateway.commands,
            health=self._health,
            since=self._states.since,
            wake_sender=self.outbox.wakeup.set,
            media=self.media_files,
            jobs=self.schedules,
            models=self.model.health,
            metrics=self.metrics,
        )
        app = build_server(
            metrics=self.metrics,
            ready=self._health,
            routes=routes,
            max_body_bytes=self.config.server.max_body_bytes,
            allowed_hosts=self.config.server.allowed_hosts,
        )
        try:
            self._runner, port = await listen(app, self.config.server.host, self.config.server.port)
        except OSError as exc:
            raise listen_failed(self.config, exc) from None
        self.server_url = f"http://{self.config.server.host}:{port}"
        log.info("listening on %s", self.server_url)

    async def _stop_server(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
