"""Stored answers (API lists, pages) bounded per user: a client that adds a random parameter to every request
would otherwise store a new answer each time and grow the cache without end.

Each user has an index of their keys, newest last; storing one more beyond ``keep`` deletes the oldest. The
index is read and written without a lock, so two workers storing for one user at the same instant may each drop
the other's key from it; such an untracked answer still expires with its timeout, so the bound holds within a
timeout up to the number of concurrent writers."""

from django.core.cache import cache


def store_for_user(index_key: str, key: str, entry: object, *, keep: int, timeout_s: int) -> None:
    keys = [k for k in cache.get(index_key) or () if k != key] + [key]
    keep = max(1, keep)
    if len(keys) > keep:
        cache.delete_many(keys[:-keep])
        keys = keys[-keep:]
    cache.set_many({key: entry, index_key: keys}, timeout_s)
