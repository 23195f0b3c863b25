"""One module per database backend: what `SqlStore` cannot say in portable SQL."""
