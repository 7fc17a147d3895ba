from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.engine.promises import Load, Promise, check_promise, loads, room, shortfalls, worsened

DAY = timedelta(days=1)
T0 = datetime(2026, 12, 10, tzinfo=UTC)
DEMO = {"A100": 128, "H100": 192}


def _grant(gpus: int, model: str = "", start: int = 0, days: int = 7) -> Promise:
    return Promise(gpus, model, T0 + start * DAY, T0 + (start + days) * DAY)


def test_the_reported_case_refuses_model_promises_once_any_model_ones_fill_the_fleet() -> None:
    promised = [Promise(287)]  # standing any-model guarantees of the top-level teams
    first = check_promise(DEMO, promised, _grant(33))
    assert first.fits and first.room == 33
    promised.append(_grant(33))
    a100 = check_promise(DEMO, promised, _grant(128, "A100"))
    h100 = check_promise(DEMO, promised, _grant(192, "H100"))
    assert (a100.fits, a100.room, h100.fits, h100.room) == (False, 0, False, 0)
    worst = h100.worst()
    assert worst is not None and worst.whole_fleet and (worst.promised, worst.supply, worst.short) == (512, 320, 192)
    assert worst.sentence() == (
        "from 2026-12-10 00:00 to 2026-12-17 00:00, all promises (any-model and per-model) would be 512 on the "
        "fleet's 320 GPUs (128 A100 + 192 H100), 192 short"
    )


def test_a_model_promise_beyond_its_model_names_the_model() -> None:
    result = check_promise(DEMO, [Promise(192, "H100")], _grant(192, "H100"))
    assert not result.fits
    worst = result.worst()
    assert worst is not None and worst.models == ("H100",) and not worst.whole_fleet
    assert worst.sentence() == (
        "from 2026-12-10 00:00 to 2026-12-17 00:00, H100 promises would be 384 on 192 H100 GPUs, 192 short"
    )


def test_model_promises_leave_any_model_room_only_on_the_other_models() -> None:
    promised = [Promise(100, "A100"), Promise(150, "H100")]
    assert check_promise(DEMO, promised, _grant(70)).room == 70
    assert check_promise(DEMO, [*promised, Promise(60)], _grant(1, "A100")).room == 10


def test_promises_that_do_not_overlap_in_time_do_not_compete() -> None:
    promised = [_grant(320, start=0, days=7)]
    assert check_promise(DEMO, promised, _grant(320, start=7, days=7)).fits  # [0, 7) then [7, 14): touching
    late = check_promise(DEMO, promised, _grant(1, start=6, days=7))
    assert not late.fits and late.tightest is not None and late.tightest.ends_at == T0 + 7 * DAY


def test_the_room_is_the_least_over_the_whole_period_and_says_where() -> None:
    promised = [_grant(100, "H100", start=2, days=2), _grant(50, start=3, days=4)]
    result = check_promise(DEMO, promised, _grant(200, start=0, days=10))
    assert result.room == 170  # days 3-4: 320 - 100 - 50
    assert result.tightest is not None and (result.tightest.starts_at, result.tightest.ends_at) == (
        T0 + 3 * DAY,
        T0 + 4 * DAY,
    )
    assert [(s.starts_at, s.whole_fleet, s.short) for s in result.shortfalls] == [(T0 + 3 * DAY, True, 30)]


def test_a_model_the_fleet_lacks_has_no_room() -> None:
    result = check_promise(DEMO, [], _grant(1, "B200"))
    assert not result.fits and result.room == 0
    worst = result.worst()
    assert worst is not None and worst.sentence().endswith("B200 promises would be 1 on 0 B200 GPUs, 1 short")


def test_a_shortage_of_one_model_does_not_block_promises_it_does_not_touch() -> None:
    # H100 nodes went down after 192 H100 GPUs were promised: only 96 are left.
    shrunk, promised = {"A100": 128, "H100": 96}, [Promise(192, "H100")]
    assert check_promise(shrunk, promised, _grant(128, "A100")).fits
    assert not check_promise(shrunk, promised, _grant(1, "H100")).fits
    assert check_promise(shrunk, [*promised, Promise(100)], _grant(28)).fits
    assert not check_promise(shrunk, [*promised, Promise(100)], _grant(29)).fits


def test_loads_split_the_window_exactly_where_promises_start_and_end() -> None:
    promised = [Promise(5), _grant(3, "A100", start=1, days=2), _grant(4, start=2, days=5)]
    got = [(load.starts_at, load.ends_at, dict(load.by_model), load.any_model) for load in loads(promised, T0, None)]
    assert got == [
        (T0, T0 + DAY, {}, 5),
        (T0 + DAY, T0 + 2 * DAY, {"A100": 3}, 5),
        (T0 + 2 * DAY, T0 + 3 * DAY, {"A100": 3}, 9),
        (T0 + 3 * DAY, T0 + 7 * DAY, {}, 9),
        (T0 + 7 * DAY, None, {}, 5),
    ]


def test_an_open_ended_shortfall_says_onwards() -> None:
    result = check_promise(DEMO, [Promise(300)], Promise(21, starts_at=T0))
    worst = result.worst()
    assert worst is not None and worst.sentence().startswith("from 2026-12-10 00:00 onwards, all promises")


def test_room_and_shortfalls_agree_on_one_interval() -> None:
    load = Load(T0, None, {"A100": 100}, 200)
    assert room(DEMO, load, "A100") == 20 and room(DEMO, load, "H100") == 20 and room(DEMO, load, "") == 20
    assert shortfalls(DEMO, load) == ()
    assert [s.models for s in shortfalls(DEMO, Load(T0, None, {"A100": 129}, 200))] == [("A100",), ("A100", "H100")]


def test_a_candidate_needs_a_start() -> None:
    with pytest.raises(ValueError, match="needs a start"):
        check_promise(DEMO, [], Promise(1))


def test_an_edit_is_blamed_only_for_the_shortfalls_it_creates_or_deepens() -> None:
    shrunk = {"A100": 128, "H100": 96}  # H100 nodes went down under 192 promised H100 GPUs
    before = [Promise(192, "H100"), Promise(20), _grant(10, start=3, days=2)]
    assert worsened(shrunk, before, [Promise(192, "H100"), Promise(30), _grant(10, start=3, days=2)], T0) == []
    deeper = worsened(shrunk, before, [Promise(192, "H100"), Promise(119), _grant(10, start=3, days=2)], T0)
    assert [(s.starts_at, s.ends_at, s.whole_fleet, s.short) for s in deeper] == [
        (T0 + 3 * DAY, T0 + 5 * DAY, True, 1)  # 119 + 10 any-model + H100's 96 on 224, only while the grant runs
    ]
    sentence = deeper[0].sentence()
    assert sentence.endswith(
        "all promises (any-model and per-model, H100 promises counted up to their model's GPUs) would be 225 on "
        "the fleet's 224 GPUs (128 A100 + 96 H100), 1 short"
    )
    assert [s.models for s in worsened(shrunk, before, [Promise(193, "H100"), Promise(20)], T0)] == [("H100",)]
