# Generated from docs/django.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/django.md:10

# settings.py
INSTALLED_APPS = [
    # ...
    "fencing.django",
    "billing",
]
