"""Revisions of the SDK's own tables."""
