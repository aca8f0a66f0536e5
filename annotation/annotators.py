"""Bringing annotators in and seeing who has done how much: the organization's signup link, and each
user's annotations on the server next to the reviews already pulled into the store."""

from __future__ import annotations

from collections import Counter

from annotation.client import Server, calls
from annotation.pull import fetch_reviews
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.store import Store


def invite_link(server: Server, *, reset: bool = False) -> str:
    """The signup link of the server's organization; `reset` makes a new one, so the old link stops working."""
    with calls(server):
        organizations = server.client.organizations
        invite = organizations.reset_token() if reset else organizations.invites.get_invite_link()
    return f"{server.url}{invite.invite_url}"


def annotator_rows(store: Store, server: Server, review: ReviewSettings, registry: Registry) -> list[tuple]:
    """(email, name, annotations on the server in our projects, of them pulled into the store, last
    activity) for every user of the organization, most annotations first."""
    tasks = [*store.get_review_tasks("question").values(), *store.get_second_look_tasks().values()]
    projects = {project for project, task in tasks if task is not None}
    on_server, _unreadable = fetch_reviews(server, projects, registry, review)
    submitted = Counter(r.annotator for r in on_server)
    pulled = Counter(r.annotator for r in store.get_reviews())
    with calls(server):
        users = server.client.users.list()
    rows = [(u.email, " ".join(p for p in (u.first_name, u.last_name) if p) or "-", submitted[u.email],
             pulled[u.email], str(u.last_activity or "-")[:16].replace("T", " ")) for u in users]
    return sorted(rows, key=lambda row: (-row[2], row[0]))
