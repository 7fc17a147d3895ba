"""Group mappings through the API and the admin: admins write with a reason (audited), others read only,
bad input is a 400 naming the field."""

from django.urls import reverse

from scheduling.models import GroupMapping

URL = "/api/v1/group-mappings/"


def test_an_admin_adds_a_mapping_with_a_reason_kept_in_its_history(api, cast, teams):
    response = api("admin").post(
        URL, {"pattern": "gpu-nlp-*", "team": "nlp", "role": "lead", "reason": "NLP leads from the directory"},
        format="json",
    )
    assert response.status_code == 201, response.content
    mapping = GroupMapping.objects.get()
    assert (mapping.pattern, mapping.team.slug, mapping.role) == ("gpu-nlp-*", "nlp", "lead")
    version = mapping.history.get()
    assert version.history_user == cast["admin"] and version.history_change_reason == "NLP leads from the directory"
    assert "reason" not in response.json()


def test_a_mapping_without_a_reason_is_refused_naming_the_field(api, teams):
    response = api("admin").post(URL, {"pattern": "x", "team": "nlp", "role": "lead", "reason": " "}, format="json")
    assert response.status_code == 400 and "reason" in response.json()
    assert not GroupMapping.objects.exists()


def test_an_unknown_team_or_role_is_a_400_naming_the_field(api, teams):
    response = api("admin").post(URL, {"pattern": "x", "team": "nope", "role": "boss", "reason": "r"}, format="json")
    assert response.status_code == 400 and {"team", "role"} <= set(response.json())


def test_a_researcher_reads_mappings_but_cannot_write_them(api, cast, teams):
    GroupMapping.objects.create(pattern="nlp", team=teams["nlp"])
    assert api("researcher").get(URL).json()["results"][0]["pattern"] == "nlp"
    response = api("researcher").post(URL, {"pattern": "y", "team": "nlp", "role": "lead", "reason": "r"})
    assert response.status_code == 403 and GroupMapping.objects.count() == 1


def test_deleting_a_mapping_is_audited(api, cast, teams):
    mapping = GroupMapping.objects.create(pattern="nlp", team=teams["nlp"])
    response = api("admin").delete(f"{URL}{mapping.pk}/?reason=group retired")
    assert response.status_code == 204
    deleted = GroupMapping.history.get(history_type="-")
    assert deleted.history_user == cast["admin"] and deleted.history_change_reason == "group retired"


def test_the_admin_saves_a_mapping_with_the_reason_typed_in(client, cast, teams):
    client.force_login(cast["admin"])
    response = client.post(
        reverse("admin:scheduling_groupmapping_add"),
        {"pattern": "research-*", "team": teams["research"].pk, "role": "researcher", "change_reason": "new lab"},
    )
    assert response.status_code == 302, response.content[:2000]
    version = GroupMapping.objects.get().history.get()
    assert version.history_user == cast["admin"] and version.history_change_reason == "new lab"
