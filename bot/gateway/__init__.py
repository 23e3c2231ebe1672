"""The gateway: where inbound messages enter the core and session work is serialized.

`service` accepts messages (`GatewayService`), `admission` decides who gets in, `lanes`
runs typed work one at a time per session, `recovery` re-queues what a restart
interrupted, `session_commands` resets, stops and compacts sessions, and `replies` sends
answers that are not model turns.
"""
