"""Part of the composition root (bot/app.py): the presses of buttons, with the action each
kind of choice runs in its session's lane. Kept apart so App stays one readable page."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from bot.gateway.approvals import ApprovalChoice
from bot.gateway.command_choices import ModelChoice, ResetChoice
from bot.gateway.presses import Presses
from bot.gateway.questions import QuestionChoice
from bot.scheduler.job_choices import JobChoice
from bot.scheduler.reminder_choices import ReminderChoice
from bot.store.choices import ChoiceKind

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.agent.workspace import Workspace
    from bot.config import Config
    from bot.gateway.lanes import Lanes
    from bot.gateway.service import ActivityObserver
    from bot.gateway.session_commands import SessionCommands
    from bot.metrics import Metrics
    from bot.outbox.writer import Outbox
    from bot.scheduler.jobs import Jobs
    from bot.scheduler.reminders import Reminders
    from bot.scheduler.schedules import Schedules
    from bot.store.base import Store
    from bot.tools.registry import ToolRegistry


class Built(Protocol):
    """What the presses use of the collaborators App has built before them."""

    config: Config
    store: Store
    lanes: Lanes
    outbox: Outbox
    reminders: Reminders
    schedules: Schedules
    tools: ToolRegistry
    runner: AgentRunner
    workspace: Workspace
    metrics: Metrics


def presses_for(
    built: Built,
    *,
    commands: SessionCommands,
    activity: ActivityObserver,
    jobs: Jobs,
    clock: Callable[[], float],
) -> Presses:
    approvals = ApprovalChoice(
        config=built.config,
        store=built.store,
        tools=built.tools,
        runner=built.runner,
        outbox=built.outbox,
        workspace=built.workspace.path,
    )
    question = QuestionChoice(
        inbound=built.store,
        lanes=built.lanes,
        activity=activity,
        metrics=built.metrics,
        clock=clock,
    )
    return Presses(
        config=built.config,
        store=built.store,
        lanes=built.lanes,
        outbox=built.outbox,
        actions={
            ChoiceKind.MODEL: ModelChoice(commands),
            ChoiceKind.RESET: ResetChoice(commands),
            ChoiceKind.REMINDER: ReminderChoice(built.reminders),
            ChoiceKind.JOB: JobChoice(built.schedules),
            ChoiceKind.APPROVAL: approvals,
            ChoiceKind.QUESTION: question,
        },
        metrics=built.metrics,
        timer=jobs,
        clock=clock,
    )
