"""Settings for the Celery workers of tests/test_celery_workers.py
(``DJANGO_SETTINGS_MODULE=django_app.settings``): the test app on the SQLite file named by
``FENCING_TEST_DJANGO_DB``, shared by the workers and the test. (tests/test_django.py
configures Django itself, on SQLite and PostgreSQL.)"""

from __future__ import annotations

import os

SECRET_KEY = "tests-only"
INSTALLED_APPS = ["fencing.django", "django_app"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("FENCING_TEST_DJANGO_DB", "django.db"),
        "OPTIONS": {"timeout": 60},  # two workers write the one file
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
