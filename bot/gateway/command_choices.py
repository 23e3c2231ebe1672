"""The presses of the choices chat commands offer: a model from `/model`'s list, and the
"start fresh?" question `/reset` asks in a longer conversation. Each does what the command
would, in the session's lane, and is safe to run twice for one press: a model already
chosen is not chosen again, and a session already replaced is not reset again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.buttons.choices import TIMED_OUT_LINE, Outcome, presser
from bot.commands import RESET, current_model, model_listing
from bot.sessions.models import allowed_models
from bot.store.choices import Choice
from bot.types import SessionOrigin

if TYPE_CHECKING:
    from bot.commands import CommandHost


class ModelChoice:
    """The `ChoiceAction` of `/model`'s list."""

    def __init__(self, host: CommandHost) -> None:
        self.host = host

    async def act(self, choice: Choice) -> Outcome:
        option = choice.pressed_option
        if option is None:
            return Outcome(TIMED_OUT_LINE)
        config, key = self.host.config, choice.session_key
        model = option.value
        if model not in allowed_models(config):
            return Outcome(f"⚠️ {model} is no longer offered; nothing changed.")
        # The list shows its marker on the model the session uses after the press.
        listing = Outcome(f"✅ This session uses {model}.", model_listing(config, model))
        if current_model(config, await self.host.current_session(key)) == model:
            return listing
        origin = SessionOrigin.from_dict(choice.payload["origin"])
        await self.host.choose_model(key, origin, model)
        line = (
            f"✅ Model switched to {model} by {presser(choice)}. The next request starts a new "
            "prompt cache for it."
        )
        return Outcome(line, listing.text)


class ResetChoice:
    """The `ChoiceAction` of `/reset`'s question."""

    def __init__(self, host: CommandHost) -> None:
        self.host = host

    async def act(self, choice: Choice) -> Outcome:
        option = choice.pressed_option
        if option is None:
            return Outcome("⌛ No answer in time; the session was kept.")
        if option.value != RESET:
            return Outcome(f"Kept this session ({presser(choice)}).")
        key = choice.session_key
        current = await self.host.current_session(key)
        if current is None or current.session_id != choice.payload["session_id"]:
            return Outcome("✅ A new session has started already.")
        origin = SessionOrigin.from_dict(choice.payload["origin"])
        session = await self.host.reset(key, origin, reason=choice.payload["reason"])
        return Outcome(f"✅ New session started by {presser(choice)}: {session.session_id}")
