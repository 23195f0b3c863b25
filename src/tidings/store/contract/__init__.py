"""The store contract, one module per part (`tidings.store.base.Store` joins them)."""
