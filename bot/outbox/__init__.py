"""The outbox: reply chunks written as rows before they are sent (`writer`), and the sender
that delivers those rows until the platform accepts or refuses them for good (`sender`)."""
