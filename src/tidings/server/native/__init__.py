"""The native JSON API under /v1 (FastAPI routers in `queues` and `messages`).

Kept empty of imports: the CLI loads `views` without paying for FastAPI.
"""
