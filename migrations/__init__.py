"""The Alembic environment of the SDK's own tables (``fencing.migrations`` in the wheel)."""
