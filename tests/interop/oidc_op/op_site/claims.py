"""The claims the provider hands out, at userinfo and (OIDC_IDTOKEN_INCLUDE_CLAIMS) in ID tokens."""

from django.utils.translation import gettext_lazy as _
from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    # The library's default leaves name and preferred_username empty (only given_name,
    # family_name, nickname and email come from the User model).
    claims["name"] = user.get_full_name() or user.username
    claims["given_name"] = user.first_name
    claims["family_name"] = user.last_name
    claims["preferred_username"] = user.username
    claims["email"] = user.email
    claims["email_verified"] = bool(user.email)
    return claims


class GroupsScopeClaims(ScopeClaims):
    """Scope `groups`: the names of the user's Django groups, read at each token request."""

    info_groups = (_("Groups"), _("The groups you belong to."))

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
