"""hostd/plugins/restart.py on its own: restart backoff and list_changed pacing, fed timestamps, exact values.

Both classes are sans-IO, so every rule here is a function call with a chosen ``now`` (seconds): no
process, no clock, no sleep. The supervisor tests cover the wiring; these cover the arithmetic.
"""

from __future__ import annotations

import random

import pytest

from hostd.plugins.restart import RefreshPacer, RestartPolicy


def exact(max_restarts: int = 5, window: float = 60.0) -> RestartPolicy:
    """The default policy (5 restarts in 60 s, 60 s health reset) without jitter, so every delay is exact."""
    return RestartPolicy(jitter=0.0, max_restarts=max_restarts, window=window)


# -- RestartPolicy -----------------------------------------------------------------------------


def test_backoff_doubles_from_half_a_second_and_gives_up_at_the_sixth_failure_in_60_s() -> None:
    policy = exact()
    delays = [policy.record_failure(float(t)) for t in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, None]
    # Giving up is sticky while the five failures are inside the window.
    assert policy.record_failure(59.0) is None


def test_failures_older_than_the_window_stop_counting() -> None:
    policy = exact()
    for t in range(5):
        assert policy.record_failure(float(t)) is not None
    assert policy.record_failure(59.9) is None  # the failure at 0 s is 59.9 s old: still inside
    # At 60.0 s the failure at 0 s leaves the window (age >= 60): one slot frees, and the backoff
    # is counted from the four failures still inside (1, 2, 3, 4 s): 0.5 * 2**4.
    assert policy.record_failure(60.0) == 8.0
    assert policy.record_failure(60.5) is None  # 1, 2, 3, 4 and 60 s: five again
    # Much later every old failure is gone: the backoff starts over.
    assert policy.record_failure(200.0) == 0.5


def test_delay_is_capped_at_30_s() -> None:
    policy = exact(max_restarts=10)
    delays = [policy.record_failure(float(t)) for t in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_jitter_is_within_20_percent_and_drawn_from_the_given_rng() -> None:
    policy = RestartPolicy(rng=random.Random(7))
    mirror = random.Random(7)
    for attempt, t in enumerate([0.0, 1.0, 2.0, 3.0, 4.0]):
        delay = policy.record_failure(t)
        base = 0.5 * 2**attempt
        assert delay == base * (1 + mirror.uniform(-0.2, 0.2))
        assert 0.8 * base <= delay <= 1.2 * base


def test_sixty_seconds_of_health_reset_the_count() -> None:
    # With the defaults (60 s window, 60 s health) a failure is always out of the window by the time
    # 60 s of health have passed since it, so the reset is seen here with a longer window.
    policy = exact(window=600.0)
    for t in range(5):
        policy.record_failure(float(t))
    policy.record_healthy(since=5.0, now=64.9)  # 59.9 s healthy: not enough
    assert policy.record_failure(64.9) is None
    policy.record_healthy(since=5.0, now=65.0)  # 60 s healthy: the count resets
    assert policy.record_failure(65.0) == 0.5
    assert policy.record_failure(66.0) == 1.0


def test_health_shorter_than_60_s_keeps_the_count_under_the_defaults() -> None:
    policy = exact()
    for t in range(5):
        policy.record_failure(float(t))
    policy.record_healthy(since=5.0, now=59.0)
    assert policy.record_failure(59.0) is None


def test_explicit_reset_forgets_every_failure() -> None:
    policy = exact()
    for t in range(5):
        policy.record_failure(float(t))
    assert policy.record_failure(5.0) is None
    policy.reset()
    assert policy.record_failure(5.0) == 0.5


def test_mode_never_never_restarts() -> None:
    policy = RestartPolicy(mode="never")
    assert policy.record_failure(0.0) is None
    assert policy.record_failure(1000.0) is None


# -- RefreshPacer ------------------------------------------------------------------------------


def test_first_walk_starts_at_once_and_the_next_waits_the_minimum_interval() -> None:
    pacer = RefreshPacer()
    assert pacer.notify(10.0) is True
    assert pacer.requested
    assert pacer.next_walk_delay(10.0) == 0.0
    pacer.begin_walk()
    assert not pacer.requested
    assert pacer.walks == 1
    assert pacer.end_walk(10.2, changed=True) is True
    # 0.5 s apart, counted from the previous walk's end.
    assert pacer.next_walk_delay(10.3) == pytest.approx(0.4)
    assert pacer.next_walk_delay(10.7) == 0.0
    assert pacer.next_walk_delay(20.0) == 0.0


def test_notifications_during_a_walk_queue_exactly_one_more() -> None:
    pacer = RefreshPacer()
    pacer.notify(0.0)
    pacer.begin_walk()
    for t in (0.01, 0.02, 0.03):
        assert pacer.notify(t) is True
    assert pacer.requested  # one flag, however many notifications
    pacer.end_walk(0.1, changed=True)
    pacer.begin_walk()
    assert not pacer.requested
    assert pacer.walks == 2


def test_three_unchanged_walks_each_echoed_within_the_loop_window_stop_refresh() -> None:
    pacer = RefreshPacer()
    assert pacer.end_walk(0.0, changed=False) is True  # the first walk has no predecessor: not an echo
    assert pacer.end_walk(1.0, changed=False) is True  # echo 1 (1.0 < 1.0 + 0.5)
    assert pacer.end_walk(2.0, changed=False) is True  # echo 2
    assert pacer.end_walk(3.0, changed=False) is False  # echo 3: a feedback loop
    assert pacer.stopped
    assert not pacer.requested
    assert pacer.notify(3.1) is False
    assert not pacer.requested


def test_a_changed_walk_or_a_slow_echo_restarts_the_loop_count() -> None:
    pacer = RefreshPacer()
    pacer.end_walk(0.0, changed=False)
    pacer.end_walk(1.0, changed=False)  # echo 1
    pacer.end_walk(2.0, changed=False)  # echo 2
    pacer.end_walk(3.0, changed=True)  # the tools did change: not a loop
    pacer.end_walk(4.0, changed=False)  # echo 1
    pacer.end_walk(5.0, changed=False)  # echo 2
    pacer.end_walk(6.5, changed=False)  # 1.5 s after the previous end: not an echo (bound is < 1.5)
    pacer.end_walk(7.0, changed=False)  # echo 1
    assert pacer.end_walk(8.0, changed=False) is True  # echo 2
    assert not pacer.stopped
    assert pacer.end_walk(9.0, changed=False) is False  # echo 3
