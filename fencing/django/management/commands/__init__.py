"""``manage.py fencing``: the operator's commands of the ``fencing`` CLI."""
