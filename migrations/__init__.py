"""Alembic migrations for the relay's database (run by ``e2ee-relay migrate`` or at start)."""
