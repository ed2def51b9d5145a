"""What the fixture changes on the provider: users, groups, clients, signing keys.

Run in the server (the admin endpoint, views.admin) while it is up, or by
`manage.py op_admin OP JSON` while it is down; both write the same SQLite database, which the
library reads on every request (its only in-process key cache, in
oidc_provider.lib.utils.token, is keyed by kid and drops kids gone from the database), so a
change holds from the next request on.
"""

import io
import json

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import transaction
from oidc_provider.models import Client, ResponseType, RSAKey

FOREIGN_KEY = "foreign_jwks_key.pem"  # in the data dir: the key the foreign JWKS publishes
FOREIGN_ON = "foreign_jwks.on"  # in the data dir: present while the JWKS serves it


def _set_groups(user, groups):
    user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])


@transaction.atomic
def add_user(username, password, email="", groups=(), first_name="", last_name=""):
    """Creates the user, or resets an existing one to exactly these values."""
    user, _ = User.objects.update_or_create(
        username=username,
        defaults={"email": email, "first_name": first_name, "last_name": last_name, "is_active": True},
    )
    user.set_password(password)
    user.save()
    _set_groups(user, groups)
    return {"username": username, "sub": str(user.pk)}


@transaction.atomic
def set_groups(username, groups):
    _set_groups(User.objects.get(username=username), groups)
    return {"username": username, "groups": sorted(groups)}


@transaction.atomic
def add_client(
    client_id,
    client_secret,
    redirect_uris,
    post_logout_redirect_uris=(),
    require_consent=False,
    reuse_consent=True,
):
    """A confidential client of the code flow with RS256 ID tokens (created or replaced)."""
    client, _ = Client.objects.update_or_create(
        client_id=client_id,
        defaults={
            "name": client_id,
            "client_type": "confidential",
            "client_secret": client_secret,
            "jwt_alg": "RS256",
            "require_consent": require_consent,
            "reuse_consent": reuse_consent,
            "_redirect_uris": "\n".join(redirect_uris),
            "_post_logout_redirect_uris": "\n".join(post_logout_redirect_uris),
        },
    )
    # The authorize endpoint refuses response types the client was not given.
    client.response_types.set([ResponseType.objects.get(value="code")])
    return {"client_id": client_id}


def kids():
    """The kids in the database, the signing one first (the library signs with the lowest id)."""
    return [k.kid for k in RSAKey.objects.order_by("id")]


def ensure_key():
    if not RSAKey.objects.exists():
        call_command("creatersakey", stdout=io.StringIO())
    return {"kids": kids()}


@transaction.atomic
def rotate_key():
    """A new key from the library's creatersakey; every older key leaves the database (and JWKS)."""
    old = list(RSAKey.objects.values_list("id", flat=True))
    call_command("creatersakey", stdout=io.StringIO())
    RSAKey.objects.filter(id__in=old).delete()
    (new,) = kids()
    return {"kid": new}


def serve_foreign_jwks(on):
    data = settings.DATA_DIR
    if on and not (data / FOREIGN_KEY).exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        (data / FOREIGN_KEY).write_bytes(pem)
    flag = data / FOREIGN_ON
    if on:
        flag.touch()
    else:
        flag.unlink(missing_ok=True)
    return {"foreign": bool(on)}


def state():
    return {"kids": kids(), "foreign_jwks": (settings.DATA_DIR / FOREIGN_ON).exists()}


OPS = {
    "add_user": add_user,
    "set_groups": set_groups,
    "add_client": add_client,
    "ensure_key": ensure_key,
    "rotate_key": rotate_key,
    "serve_foreign_jwks": serve_foreign_jwks,
    "state": state,
}


def run(op, args):
    return OPS[op](**args)


def run_json(op, body):
    return json.dumps(run(op, json.loads(body or "{}")))
