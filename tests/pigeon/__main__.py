"""`krill` with the pigeon channel in its registry: `python -m tests.pigeon run --config ...`.
The registry's list gains the pigeon's entry before anything reads it, as a line added to
channels/registry.py would; everything else is the real command line."""

import sys

import channels.registry
from tests import pigeon

channels.registry.CHANNELS = (*channels.registry.CHANNELS, pigeon.SPEC)

from bot.cli import main  # noqa: E402  (after the registry has the pigeon)

sys.exit(main())
