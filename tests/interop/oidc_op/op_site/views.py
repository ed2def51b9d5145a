import hmac
import json

import jwt.utils
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oidc_provider.models import RSAKey
from oidc_provider.views import JwksView

from op_site import ops


def index(request):
    """Whether this browser holds an OP session: lets a test see that logout ended it."""
    if request.user.is_authenticated:
        return HttpResponse(f"signed in as {request.user.username}\n", content_type="text/plain")
    return HttpResponse("not signed in\n", content_type="text/plain")


def jwks(request):
    """The library's JWKS, or, while the fixture asks for it, a key that signs nothing here."""
    if not (settings.DATA_DIR / ops.FOREIGN_ON).exists():
        return JwksView.as_view()(request)
    pem = (settings.DATA_DIR / ops.FOREIGN_KEY).read_text()
    numbers = serialization.load_pem_private_key(pem.encode(), password=None).public_key().public_numbers()
    key = {
        "kty": "RSA",
        "alg": "RS256",
        "use": "sig",
        "kid": RSAKey(key=pem).kid,  # the library's kid scheme (md5 of the PEM)
        "n": jwt.utils.to_base64url_uint(numbers.n).decode("ascii"),
        "e": jwt.utils.to_base64url_uint(numbers.e).decode("ascii"),
    }
    response = JsonResponse({"keys": [key]})
    response["Access-Control-Allow-Origin"] = "*"
    return response


@csrf_exempt
@require_POST
def admin(request, op):
    """The fixture's admin operations (op_site.ops), for the holder of OIDC_OP_ADMIN_SECRET."""
    given = request.headers.get("X-Op-Admin-Secret", "")
    if not settings.ADMIN_SECRET or not hmac.compare_digest(given, settings.ADMIN_SECRET):
        return JsonResponse({"error": "forbidden"}, status=403)
    if op not in ops.OPS:
        return JsonResponse({"error": f"unknown op {op}"}, status=404)
    try:
        return JsonResponse(ops.run(op, json.loads(request.body or b"{}")))
    except Exception as e:  # noqa: BLE001 - handed back to the fixture, which raises it
        return JsonResponse({"error": f"{type(e).__name__}: {e}"}, status=400)
