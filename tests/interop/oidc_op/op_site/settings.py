"""Settings of the loopback OpenID provider used by Quarry's interop tests.

Everything the provider writes lives in $OIDC_OP_DATA (never in the repository). The fixture
(tests/interop/oidc_op.py) also sets OIDC_OP_SITE_URL (http://127.0.0.1:PORT, so the issuer is
that plus /openid) and OIDC_OP_ADMIN_SECRET (guards the fixture's admin endpoint).
"""

import os
from pathlib import Path

DATA_DIR = Path(os.environ["OIDC_OP_DATA"])
# Stable across restarts on one data dir, so OP sessions survive stop/start.
SECRET_KEY = (DATA_DIR / "secret_key").read_text().strip()
ADMIN_SECRET = os.environ.get("OIDC_OP_ADMIN_SECRET", "")

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
    "op_site",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "op_site.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ],
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "op.sqlite3",
        # The threaded server's requests, its admin endpoint and `manage.py op_admin` share the
        # file: writers queue (IMMEDIATE, timeout) instead of failing with "database is locked".
        "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

# Logins are a test fixture's: PBKDF2's million rounds would cost ~1 s of CPU per sign-in.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Browsers scope cookies by host, not port: the RP under test also lives on 127.0.0.1, so the
# OP's cookies get names of their own.
SESSION_COOKIE_NAME = "op_sessionid"
CSRF_COOKIE_NAME = "op_csrftoken"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

USE_TZ = True
TIME_ZONE = "UTC"

# django-oidc-provider: the issuer is SITE_URL + "/openid" (the mount point in urls.py).
SITE_URL = os.environ.get("OIDC_OP_SITE_URL")
OIDC_USERINFO = "op_site.claims.userinfo"
OIDC_EXTRA_SCOPE_CLAIMS = "op_site.claims.GroupsScopeClaims"
OIDC_IDTOKEN_INCLUDE_CLAIMS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    # Request lines and the library's reasons for refusing (e.g. "[Token] Invalid redirect
    # uri") land in the server's log file in the data dir.
    "loggers": {
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "oidc_provider": {"handlers": ["console"], "level": "DEBUG", "propagate": False},
    },
}
