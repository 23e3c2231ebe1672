"""Pure mapping of Slack events and slash commands to InboundMessages (channels.slack.mapping)."""

from __future__ import annotations

from bot.config import SessionConfig
from bot.sessions.keys import session_key
from bot.types import ChatType
from channels.slack.mapping import (
    THREAD_HISTORY_LIMIT,
    BotIdentity,
    Skip,
    SlackPost,
    clean_text,
    parse_event,
    slash_message,
    slash_text,
    thread_context_lines,
    to_inbound,
)
from tests.fakes.slack import (
    app_mention,
    bot_message,
    channel_message,
    im_message,
    message_changed,
    message_deleted,
)

ME = BotIdentity(user_id="UBOT", bot_id="BBOT", team_id="T1", name="krill")
SESSION = SessionConfig()


def post_of(payload: dict, **kw: object) -> SlackPost:
    parsed = parse_event(payload["event"], ME, **kw)  # type: ignore[arg-type]
    assert isinstance(parsed, SlackPost), parsed
    return parsed


def key_of(post: SlackPost, *, mentioned: bool) -> str:
    return session_key(to_inbound(post, mentioned=mentioned), SESSION)


def test_dm_maps_to_direct_session_and_top_level_reply() -> None:
    post = post_of(im_message("U1", "hello", channel="D9", ts="1700000001.000100"))
    msg = to_inbound(post, mentioned=post.mentioned)
    assert msg.chat_type == ChatType.DIRECT
    assert (msg.chat_id, msg.user_id, msg.text) == ("D9", "U1", "hello")
    assert msg.message_id == "D9:1700000001.000100"
    assert msg.mentioned and msg.thread_id is None
    assert msg.address.thread_id is None and msg.address.reply_to == "1700000001.000100"
    assert session_key(msg, SESSION) == "agent:main:slack:direct:u1"


def test_dm_thread_keeps_dm_key_but_replies_in_thread() -> None:
    post = post_of(im_message("U1", "more", ts="1700000002.000100", thread_ts="1700000001.000100"))
    msg = to_inbound(post, mentioned=False)
    assert session_key(msg, SESSION) == "agent:main:slack:direct:u1"
    assert msg.address.thread_id == "1700000001.000100"


def test_top_level_mention_seeds_a_thread_under_itself() -> None:
    post = post_of(app_mention("C1", "U1", "what is up?", ts="1700000003.000100"))
    assert post.mentioned and post.text == "what is up?"
    msg = to_inbound(post, mentioned=True)
    assert msg.thread_id == msg.address.thread_id == "1700000003.000100"
    assert session_key(msg, SESSION) == "agent:main:slack:channel:c1:thread:1700000003.000100"


def test_app_mention_and_message_event_of_one_post_agree() -> None:
    ts = "1700000004.000100"
    a = post_of(app_mention("C1", "U1", "hi", ts=ts))
    m = post_of(channel_message("C1", "U1", "<@UBOT> hi", ts=ts))
    assert a.message_id == m.message_id == f"C1:{ts}"
    assert key_of(a, mentioned=a.mentioned) == key_of(m, mentioned=m.mentioned)
    assert a.text == m.text == "hi"


def test_unmentioned_top_level_message_stays_on_channel_key() -> None:
    post = post_of(channel_message("C1", "U1", "lunch?"))
    msg = to_inbound(post, mentioned=post.mentioned)
    assert not msg.mentioned and msg.thread_id is None
    assert session_key(msg, SESSION) == "agent:main:slack:channel:c1"


def test_private_channel_and_mpim_are_channels() -> None:
    for kind in ("group", "mpim"):
        post = post_of(channel_message("G1", "U1", "x", channel_type=kind))
        assert post.chat_type == ChatType.CHANNEL


def test_thread_reply_maps_to_thread_key() -> None:
    post = post_of(channel_message("C1", "U1", "and?", thread_ts="1700000005.000100"))
    assert post.is_thread_reply and not post.mentioned
    msg = to_inbound(post, mentioned=True)
    assert session_key(msg, SESSION) == "agent:main:slack:channel:c1:thread:1700000005.000100"


def test_reply_under_bot_message_is_marked() -> None:
    post = post_of(
        channel_message("C1", "U1", "thanks", thread_ts="1.000100", parent_user_id="UBOT")
    )
    assert post.parent_is_bot


def test_skips() -> None:
    cases = {
        "own": channel_message("C1", "UBOT", "me"),
        "own bot id": bot_message("C1", "me", bot_id="BBOT"),
        "other bot": bot_message("C1", "beep"),
        "edit": message_changed("C1", "1.000100", "new"),
        "delete": message_deleted("C1", "1.000100"),
        "join": channel_message("C1", "U1", "<@U1> has joined", subtype="channel_join"),
        "empty": channel_message("C1", "U1", "   "),
    }
    for name, payload in cases.items():
        assert isinstance(parse_event(payload["event"], ME), Skip), name
    assert isinstance(parse_event({"type": "reaction_added"}, ME), Skip)
    assert isinstance(parse_event({"type": "message", "text": "x"}, ME), Skip)


def test_other_bots_allowed_when_configured() -> None:
    post = post_of(bot_message("C1", "<@UBOT> ping", username="ci"), allow_bots=True)
    assert post.user == "B2" and post.user_name == "ci" and post.mentioned


def test_files_become_text_lines() -> None:
    payload = channel_message(
        "C1",
        "U1",
        "",
        subtype="file_share",
        files=[{"name": "report.pdf", "mimetype": "application/pdf"}],
    )
    assert post_of(payload).text == "[attached file: report.pdf (application/pdf)]"


def test_clean_text() -> None:
    raw = (
        "<@UBOT>: see <#C2|general>, ask <@U7|ann> or <@U8>; "
        "<https://x.io|docs> <https://y.io> <!here> a &lt; b &amp;&amp; c"
    )
    assert clean_text(raw, ME, {"U8": "bob"}, strip_mention=True) == (
        "see #general, ask @ann or @bob; docs (https://x.io) https://y.io @here a < b && c"
    )
    assert clean_text("hey <@UBOT> you", ME, strip_mention=True) == "hey @krill you"


def test_slash_text() -> None:
    assert slash_text("") == "/help"
    assert slash_text("status") == "/status"
    assert slash_text("  /reset  ") == "/reset"
    assert slash_text("compact focus on deploys") == "/compact focus on deploys"
    assert slash_text("what is the weather") is None


def test_slash_message_is_private_command_surface() -> None:
    payload = {"channel_id": "C1", "user_id": "U1", "trigger_id": "t1", "team_id": "T1"}
    msg = slash_message(payload, "/status")
    assert msg.is_command_surface and msg.address.private_to == "U1"
    assert msg.chat_type == ChatType.CHANNEL and msg.message_id == "command:t1"
    dm = slash_message({**payload, "channel_id": "D1"}, "/status")
    assert dm.chat_type == ChatType.DIRECT


def test_thread_context_lines_keep_root_and_newest() -> None:
    messages = [{"ts": f"{i}.000100", "user": "U1", "text": f"m{i}"} for i in range(1, 40)]
    messages[3] = {"ts": "4.000100", "user": "UBOT", "bot_id": "BBOT", "text": "I said"}
    messages[4] = {"ts": "5.000100", "subtype": "channel_join", "user": "U2", "text": "joined"}
    lines = thread_context_lines(messages, before_ts="30.000100", me=ME, names={"U1": "ann"})
    assert len(lines) == THREAD_HISTORY_LIMIT
    assert lines[0] == "ann: m1"
    assert lines[-1] == "ann: m29"  # the post being answered (30) and later ones are left out
    all_lines = thread_context_lines(messages[:6], before_ts="99.0", me=ME, names={})
    assert "krill (you): I said" in all_lines
    assert not any("joined" in line for line in all_lines)


def test_thread_context_since_the_last_look_is_only_what_others_said() -> None:
    messages = [
        {"ts": "1.000100", "user": "U1", "text": "the root"},
        {"ts": "2.000100", "user": "U1", "text": "seen already"},
        {"ts": "3.000100", "user": "UBOT", "bot_id": "BBOT", "text": "my own answer"},
        {"ts": "4.000100", "user": "U2", "text": "said in between"},
        {"ts": "5.000100", "user": "U1", "text": "the new mention"},
    ]
    lines = thread_context_lines(
        messages, before_ts="5.000100", me=ME, names={"U2": "bea"}, after_ts="2.000100"
    )
    assert lines == ["bea: said in between"]
