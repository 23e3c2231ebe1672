"""Channel adapters: each translates one platform's events to `InboundMessage`s and
`OutboundMessage`s back to platform calls."""
