"""`SqlStore`: the `Store` protocol implemented once, over any `Driver`."""

from __future__ import annotations

from tidings.store.campaigns import SqlCampaigns
from tidings.store.contacts import SqlContacts
from tidings.store.email import SqlEmail
from tidings.store.limits import SqlLimits
from tidings.store.nodes import SqlNodes
from tidings.store.push import SqlPush
from tidings.store.queues import SqlQueues
from tidings.store.schedules import SqlSchedules
from tidings.store.security import SqlSecurity


class SqlStore(SqlQueues, SqlSchedules, SqlEmail, SqlContacts, SqlCampaigns, SqlNodes,
               SqlSecurity, SqlLimits, SqlPush):
    """Every part shares `SqlBase` (the driver and its queries); each adds its tables."""
