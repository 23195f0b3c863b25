"""The parts of a consumer (`tidings.engine.consumers.Consumer` puts them together):
`work` (a held job's life cycle), `poller`, `admission`, `keys`, `runner`, `completer`
and `heartbeat`."""
