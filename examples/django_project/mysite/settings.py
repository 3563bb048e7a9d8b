"""Settings of the example Django project, served by supervise.

    cd examples/django_project
    python manage.py migrate
    supervise -w 2 mysite.wsgi:application

Routes: `/`, `/notes/` (GET a list, POST a new note as JSON), `/notes/ID/`
and `/stream/` (a StreamingHttpResponse, sent chunked).

Configured from the environment, as a deployment would be: DJANGO_DB (the
sqlite file), DJANGO_SECRET_KEY, DJANGO_DEBUG, DJANGO_ALLOWED_HOSTS.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "notes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]

ROOT_URLCONF = "mysite.urls"
WSGI_APPLICATION = "mysite.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", str(BASE_DIR / "db.sqlite3")),
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# Behind a TLS-terminating proxy listed in supervise's forwarded_allow_ips,
# supervise already sets wsgi.url_scheme from X-Forwarded-Proto, so Django
# needs no SECURE_PROXY_SSL_HEADER.
