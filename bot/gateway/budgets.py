"""The gateway's per-sender budgets: how many refusals, pairing codes and command answers a
sender gets per window (then silence, so spamming the bot cannot make it spam back), and how
many model turns a sender may start per minute (then their messages wait and merge). They
are counted in the store (`bot/store/budgets.py`), so a sender limited to N per window gets
N in total, however many replicas their messages reach.
"""

REFUSAL_REPLIES = 3  # answers to refused messages per sender and window
REFUSAL_WINDOW_SECONDS = 600.0
COMMAND_REPLIES = 10  # chat commands (and their refusals) per sender and window
COMMAND_WINDOW_SECONDS = 60.0
TURN_WINDOW_SECONDS = 60.0  # the minute of agent.sender_turns_per_minute
