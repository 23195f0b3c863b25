"""Downstream limits (issue 33): the settings every node shares (`service`) and each
node's copy of them, refreshed within a second (`book`). The consumers apply them
(`tidings.jobs.consumer.limiter`)."""
