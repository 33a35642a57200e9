"""A Django app for tests/test_django.py: one fenced model (tables made by the tests)."""
