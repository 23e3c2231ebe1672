"""Tool `ask_choice(question, options)`: the model asks the person a question with a button
per option. The turn ends; the press comes back as the person's next message (the option's
words), answered like anything they type. They may type instead: the buttons never block
the chat, and they expire after `buttons.expire_after`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.buttons.choices import ChoiceSpec
from bot.store.choices import ChoiceKind, ChoiceOption
from bot.tools.registry import Tool, ToolContext, ToolError, ToolRegistry
from bot.untrusted import clean_name

if TYPE_CHECKING:
    from bot.buttons.offers import Offers

NAME = "ask_choice"
MAX_OPTIONS = 10
OPTION_CHARS = 60
QUESTION_CHARS = 1_000
DESCRIPTION = (
    "Ask the person a question with a few answers to pick from, shown as buttons under the "
    "question. Use it when the choices are few and clear. Their pick comes back as their "
    "next message (the option's words); they may also type something else."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question, shown above the buttons."},
        "options": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 2,
            "maxItems": MAX_OPTIONS,
            "description": f"2 to {MAX_OPTIONS} short answers, one button each.",
        },
    },
    "required": ["question", "options"],
}
ASKED = (
    "Asked, with a button for each option. Their answer comes as their next message. Do not "
    "repeat the question or the options; end your turn now (reply NO_REPLY if there is "
    "nothing else to say)."
)


def options_of(raw: object) -> tuple[ChoiceOption, ...]:
    """The options the model gave, each one clean line; a ToolError it can act on for
    anything else."""
    if not isinstance(raw, list) or not all(isinstance(option, str) for option in raw):
        raise ToolError("options must be a list of strings")
    labels = [clean_name(option, OPTION_CHARS) for option in raw if option.strip()]
    if not 2 <= len(labels) <= MAX_OPTIONS:
        raise ToolError(f"give 2 to {MAX_OPTIONS} options")
    if len(set(labels)) != len(labels):
        raise ToolError("the options must differ from each other")
    return tuple(ChoiceOption(label, label) for label in labels)


class AskChoiceTool:
    def __init__(self, offers: Offers) -> None:
        self.offers = offers

    def register(self, registry: ToolRegistry) -> None:
        registry.register(Tool(NAME, DESCRIPTION, SCHEMA, self.run))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        address = ctx.address
        if address is None or ctx.principal == "system":
            raise ToolError("there is no one to ask in this turn")
        question = str(args.get("question") or "").strip()[:QUESTION_CHARS]
        if not question:
            raise ToolError("question must not be empty")
        spec = ChoiceSpec(
            kind=ChoiceKind.QUESTION,
            text=question,
            options=options_of(args.get("options")),
            owner=ctx.principal,
            owner_name=ctx.principal_name,
            payload={"origin": ctx.origin.to_dict() if ctx.origin else None},
        )
        await self.offers.offer(spec, ctx.session_key, address)
        return ASKED
