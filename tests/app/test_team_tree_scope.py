"""The team tree read once per request (models/teams.py ``team_tree_scope``, views/request_scope.py): a page's
rules, selectors and context processor share one read; a write inside the scope is seen by the next read."""

import pytest
from django.urls import reverse

from scheduling.models import Team
from scheduling.models.teams import TeamTree, team_tree_scope

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("page", ["team-detail", "team-list", "overview", "quota-list"])
def test_a_page_builds_the_tree_of_every_team_at_most_once(client, cast, queues, page, monkeypatch):
    built: list[int] = []
    build = TeamTree.of.__func__

    def counting(cls, teams):
        tree = build(cls, teams)
        if not getattr(teams, "query", None) or not teams.query.where:  # the whole tree, not a filtered one
            built.append(len(tree.teams))
        return tree

    monkeypatch.setattr(TeamTree, "of", classmethod(counting))
    client.force_login(cast["lead"])
    url = reverse(page, args=["research"]) if page == "team-detail" else reverse(page)
    assert client.get(url).status_code == 200
    plain = [n for n in built if n == Team.objects.count()]
    assert len(plain) <= 2  # the one shared read, and at most the visibility read annotated with membership
    assert built  # the page did read the tree


def test_outside_a_request_every_call_reads(teams, django_assert_num_queries):
    with django_assert_num_queries(2):
        Team.objects.tree()
        Team.objects.tree()


def test_inside_a_scope_plain_and_column_limited_reads_share_one_query(teams, django_assert_num_queries):
    with team_tree_scope(), django_assert_num_queries(1):
        full = Team.objects.tree()
        slim = Team.objects.only("pk", "parent_id", "slug").tree()
        assert slim is full
        assert full.teams[teams["nlp"].pk].name == "NLP"  # every column read: no deferred-field query


def test_a_filtered_queryset_is_never_served_the_whole_tree(teams):
    with team_tree_scope():
        Team.objects.tree()
        only_nlp = Team.objects.filter(slug="nlp").tree()
    assert set(only_nlp.teams) == {teams["nlp"].pk}


def test_a_write_inside_the_scope_is_seen_by_the_next_read(teams):
    with team_tree_scope():
        before = Team.objects.tree()
        vision = Team.objects.create(slug="vision", name="Vision", parent=teams["research"])
        assert vision.pk in Team.objects.tree().subtree(teams["research"].pk)
        teams["nlp"].parent = teams["production"]
        teams["nlp"].save()
        assert Team.objects.tree().ancestors(teams["nlp"].pk) == [teams["production"].pk]
        vision.delete()
        assert vision.pk not in Team.objects.tree().teams
    assert teams["nlp"].pk in before.subtree(teams["research"].pk)  # the earlier read is left as it was


def test_scopes_do_not_leak_into_each_other(teams):
    with team_tree_scope():
        first = Team.objects.tree()
    with team_tree_scope():
        assert Team.objects.tree() is not first
