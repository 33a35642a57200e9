"""``fencing.testing``: tools for testing code that uses fences.

``servers`` starts throwaway ``redis-server`` and PostgreSQL instances on free loopback
ports. Imports the public package only.
"""
