from django.contrib.auth.views import LoginView
from django.urls import include, path, re_path

from op_site import views

urlpatterns = [
    path("", views.index),
    path("accounts/login/", LoginView.as_view(), name="login"),
    # Ahead of the library's own /openid/jwks, which discovery's jwks_uri still names.
    re_path(r"^openid/jwks/?$", views.jwks),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
    path("_op_admin/<str:op>", views.admin),
]
