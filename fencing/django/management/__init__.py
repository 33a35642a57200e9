"""Django management commands of ``fencing.django`` (``manage.py fencing ...``)."""
