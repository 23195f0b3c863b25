"""Runnable examples: `tidings serve --app examples.shop:app` from the repository root."""
