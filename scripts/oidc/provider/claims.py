"""The claims the portal reads: preferred_username, email and ``groups`` (the user's Django group names)."""

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsClaimValidator(OAuth2Validator):
    oidc_claim_scope = None  # every claim in the ID token and userinfo, whatever scopes were asked

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }
