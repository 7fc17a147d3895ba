"""Cost of mapping directory groups to team memberships (docs/identity.md).

Engine: ``memberships_from_groups`` for one person in G groups against R mapping rules (half exact names,
half shell patterns). Service: ``sync_memberships`` at a sign-in (1,000 rules over 500 teams, a person in 200
groups granting 50 teams): the first sync (every membership written with its history row) and a steady one
(nothing changed); then ``resync_identities`` over 1,000 OIDC users (last claims mapped again). On a throwaway
SQLite file or on $BENCH_DATABASE_URL (an empty database you own). Prints JSON lines: median wall and CPU
time of 5 runs after one warm-up (the first sync: one run).
"""

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._django import throwaway_django
from scheduling.engine.identity import GroupRule, memberships_from_groups

TEAMS, RULES, GROUPS = 500, 1_000, 200


def rules(rng: random.Random, count: int) -> list[GroupRule]:
    made = []
    for i in range(count):
        pattern = f"grp-{i:04d}" if i % 2 else f"grp-{i // 10:03d}?"
        made.append(GroupRule(pattern, f"t{rng.randrange(TEAMS)}", rng.choice(("researcher", "lead"))))
    return made


def person_groups(count: int) -> list[str]:
    return [f"grp-{i:04d}" for i in range(0, count * 5, 5)] + [f"other-{i}" for i in range(count // 2)]


def measure(run, runs: int = 6) -> tuple[float, float, object]:
    samples, result = [], None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    steady = samples[1:] or samples
    return statistics.median(s[0] for s in steady), statistics.median(s[1] for s in steady), result


def emit(bench: str, wall: float, cpu: float, **fields) -> None:
    print(json.dumps({"bench": bench, **fields, "wall_ms_median": round(wall * 1000, 2),
                      "cpu_ms_median": round(cpu * 1000, 2)}))


def engine() -> None:
    rng = random.Random(22)
    for rule_count, group_count in ((100, 20), (1_000, 200), (10_000, 1_000)):
        rule_list, groups = rules(rng, rule_count), person_groups(group_count)
        wall, cpu, granted = measure(lambda r=rule_list, g=groups: memberships_from_groups(g, r))
        emit("identity_engine_map", wall, cpu, rules=rule_count, groups=len(groups), teams_granted=len(granted))


def service() -> None:
    vendor = throwaway_django("identity")
    from django.contrib.auth import get_user_model

    from scheduling.models import ExternalIdentity, GroupMapping, Team
    from scheduling.services import directory, identity

    rng = random.Random(22)
    teams = {t.slug: t for t in Team.objects.bulk_create([Team(slug=f"t{i}", name=f"t{i}") for i in range(TEAMS)])}
    GroupMapping.objects.bulk_create(
        [GroupMapping(pattern=r.pattern, team=teams[r.team], role=r.role) for r in {(r.pattern, r.team): r
                                                                                   for r in rules(rng, RULES)}.values()]
    )
    users = get_user_model().objects.bulk_create([get_user_model()(username=f"u{i}") for i in range(1_000)])
    groups = person_groups(GROUPS)
    sync = lambda: identity.sync_memberships(users[0], provider="oidc", subject="u0", groups=groups)  # noqa: E731
    wall, cpu, plan = measure(sync, runs=1)
    emit("identity_sync_first", wall, cpu, database=vendor, rules=RULES, groups=len(groups),
         memberships_written=len(plan.add))
    wall, cpu, plan = measure(sync)
    emit("identity_sync_steady", wall, cpu, database=vendor, rules=RULES, groups=len(groups),
         memberships_written=len(plan.add) + len(plan.change) + len(plan.remove))
    for user in users[1:]:
        identity.sync_memberships(user, provider="oidc", subject=user.username, groups=groups[:20])
    wall, cpu, counts = measure(directory.resync_identities, runs=2)
    users_count = ExternalIdentity.objects.count()
    emit("identity_resync_oidc", wall, cpu, database=vendor, users=users_count, synced=counts["oidc"])


if __name__ == "__main__":
    engine()
    service()
