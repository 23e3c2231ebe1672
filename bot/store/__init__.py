"""Persistence: the store interface (`base.py`), each concern written once over a thin
driver seam (`db.py`), and the SQLite and PostgreSQL adapters under it."""
