"""The parts of a consumer (`tidings.jobs.consumers.Consumer` puts them together):
`work` (a held job's life cycle), `poller`, `admission`, `keys`, `runner`, `completer`
and `heartbeat`."""
