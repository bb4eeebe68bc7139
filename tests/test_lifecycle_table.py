"""The lifecycle table (``hostd/plugins/lifecycle.py``, issue 11), tested as plain function calls: no process.

The whole (state, event) product is enumerated: each pair has exactly one defined outcome, and the
rules the module header states hold for every entry, not just for the pairs that caused a bug.
"""

from __future__ import annotations

import itertools

import pytest

import hostd.plugins.lifecycle as lifecycle
from hostd.plugins.lifecycle import (
    INSTANCE_FAILURES,
    TABLE,
    UNREACHABLE,
    Action,
    Event,
    LifecycleError,
    State,
    render_table,
    transition,
)

PAIRS = list(itertools.product(State, Event))
#: The events by which a start ends: the only ways out of ``starting``.
START_ENDS = {Event.STARTED, Event.START_FAILED, Event.RETRY_FAILED, Event.CANCEL}
#: The events that come from a request of the parent (or hostd's start, for REFUSE).
REQUESTS = {Event.ENABLE, Event.RESTART, Event.DISABLE}


def changes(state: State, event: Event) -> bool:
    """Whether the pair does anything (a new state or an action)."""
    next_state, actions = TABLE[state, event]
    return next_state is not state or bool(actions)


def test_every_pair_has_exactly_one_defined_outcome() -> None:
    assert set(TABLE) | set(UNREACHABLE) == set(PAIRS)
    assert not set(TABLE) & set(UNREACHABLE)
    assert all(why for why in UNREACHABLE.values())


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=lambda v: v.name)
def test_transition_gives_the_table_entry_or_raises_for_an_unreachable_pair(state: State, event: Event) -> None:
    if (state, event) in TABLE:
        assert transition(state, event) == TABLE[state, event]
    else:
        with pytest.raises(LifecycleError) as raised:
            transition(state, event)
        assert (raised.value.state, raised.value.event) == (state, event)
        assert UNREACHABLE[state, event] in str(raised.value)


def test_the_module_header_shows_the_table_as_it_is() -> None:
    assert lifecycle.__doc__ is not None
    shown = "\n".join("    " + line for line in render_table().splitlines())
    assert shown in lifecycle.__doc__


def test_the_header_table_cells() -> None:
    """A few cells spelled out: '=' nothing, '-' unreachable, else the next state."""
    lines = {
        line.split("|")[0].strip(): [c.strip() for c in line.split("|")[1:]] for line in render_table().splitlines()
    }
    assert lines["event"] == ["stopped", "starting", "ready", "unhealthy", "error"]
    assert lines["CANCEL"] == ["=", "stopped", "stopped", "=", "="]
    assert lines["ENABLE"] == ["starting", "-", "=", "starting", "starting"]
    assert lines["DISABLE"] == ["stopped", "-", "stopped", "stopped", "stopped"]
    assert lines["GIVE_UP"] == ["=", "=", "=", "error", "="]


def test_starting_is_left_only_by_the_end_of_the_start_and_every_end_leaves_it() -> None:
    """Issue 11's class: an exit path of a start (cancellation) missing from the table."""
    for event in Event:
        if (State.STARTING, event) not in TABLE:
            continue
        next_state, _ = TABLE[State.STARTING, event]
        assert (next_state is not State.STARTING) == (event in START_ENDS), event
    assert TABLE[State.STARTING, Event.CANCEL][0] is State.STOPPED


def test_a_request_never_meets_starting() -> None:
    for event in REQUESTS:
        assert (State.STARTING, event) in UNREACHABLE


def test_every_state_change_is_told_to_the_parent() -> None:
    changes_state = {pair for pair, (next_state, _) in TABLE.items() if next_state is not pair[0]}
    assert len(changes_state) == 25  # the rule below is checked on every one (a shrunken table fails here)
    assert {pair for pair in changes_state if Action.NOTIFY_STATUS not in TABLE[pair][1]} == set()


def test_the_error_is_set_before_the_parent_is_told() -> None:
    """``error`` is recorded entering error/unhealthy and cleared entering the others, before notify."""
    checked = []
    for (state, event), (next_state, actions) in TABLE.items():
        if Action.NOTIFY_STATUS not in actions or next_state is state:
            continue
        told = actions.index(Action.NOTIFY_STATUS)
        expected = Action.RECORD_ERROR if next_state in (State.ERROR, State.UNHEALTHY) else Action.CLEAR_ERROR
        checked.append((state, event, expected in actions[:told]))
    assert len(checked) == 25  # every state change notifies (the test above): all 25 are checked
    assert [(state, event) for state, event, ok in checked if not ok] == []


def test_no_tool_outlives_ready() -> None:
    """Leaving ready removes the tools (stop or unregister) before the parent hears of the new state."""
    leaving = {}
    for event in Event:
        next_state, actions = TABLE.get((State.READY, event), (State.READY, ()))
        if next_state is not State.READY:
            told = actions.index(Action.NOTIFY_STATUS)
            leaving[event] = bool({Action.STOP_INSTANCE, Action.UNREGISTER_TOOLS} & set(actions[:told]))
    assert leaving == dict.fromkeys(
        [
            Event.CANCEL,
            Event.CRASH,
            Event.DISABLE,
            Event.LIMIT_EXCEEDED,
            Event.LIST_REFUSED,
            Event.LIVENESS_FAILED,
            Event.RESTART,
            Event.STDOUT_VIOLATION,
        ],
        True,
    )


def test_a_start_is_entered_only_with_a_spawn_and_the_spawn_comes_last() -> None:
    entered = set()
    for (state, event), (next_state, actions) in TABLE.items():
        entering = next_state is State.STARTING and state is not State.STARTING
        assert entering == (Action.SPAWN in actions), (state, event)
        if entering:
            entered.add((state, event))
            assert actions[-1] is Action.SPAWN
            # The old instance is gone before the new one spawns (same TMPDIR, same tools).
            assert state in (State.UNHEALTHY, State.ERROR) or Action.STOP_INSTANCE in actions
    assert len(TABLE) == 70  # every pair's entry was checked above
    assert entered == {
        (State.STOPPED, Event.ENABLE),
        (State.STOPPED, Event.RESTART),
        (State.READY, Event.RESTART),
        (State.UNHEALTHY, Event.ENABLE),
        (State.UNHEALTHY, Event.RESTART),
        (State.UNHEALTHY, Event.TIMER),
        (State.ERROR, Event.ENABLE),
        (State.ERROR, Event.RESTART),
        (State.ERROR, Event.TIMER),
    }


def test_the_requests_disarm_the_restart_timer() -> None:
    first = {pair: actions[0] for pair, (_, actions) in TABLE.items() if pair[1] in REQUESTS and actions}
    assert len(first) == 11  # the requests that do something: each is checked
    assert {pair: action for pair, action in first.items() if action is not Action.CANCEL_RETRY} == {}


def test_the_restart_policy_applies_only_where_its_timer_can_fire() -> None:
    applied = set()
    for (state, event), (next_state, actions) in TABLE.items():
        if Action.APPLY_RESTART_POLICY in actions:
            applied.add((state, event))
            assert next_state in (State.UNHEALTHY, State.ERROR), (state, event)
            assert actions[-1] is Action.APPLY_RESTART_POLICY
    assert applied == {
        (State.READY, Event.CRASH),
        (State.READY, Event.LIMIT_EXCEEDED),
        (State.READY, Event.LIST_REFUSED),
        (State.READY, Event.LIVENESS_FAILED),
        (State.READY, Event.STDOUT_VIOLATION),
        (State.STARTING, Event.RETRY_FAILED),
    }
    for state in State:
        fires = Action.SPAWN in TABLE[state, Event.TIMER][1]
        assert fires == (state in (State.UNHEALTHY, State.ERROR))


def test_every_instance_failure_has_the_same_outcome() -> None:
    for state in State:
        outcomes = {TABLE[state, event] for event in INSTANCE_FAILURES}
        assert len(outcomes) == 1, state
    assert TABLE[State.READY, Event.CRASH] == (
        State.UNHEALTHY,
        (
            Action.UNREGISTER_TOOLS,
            Action.RECORD_ERROR,
            Action.NOTIFY_STATUS,
            Action.STOP_INSTANCE,
            Action.APPLY_RESTART_POLICY,
        ),
    )


@pytest.mark.parametrize(
    "event",
    [*INSTANCE_FAILURES, Event.LIST_CHANGED, Event.TIMER, Event.RETRY_REFUSED, Event.GIVE_UP, Event.CANCEL],
    ids=lambda e: e.name,
)
def test_a_late_event_is_ignored_where_it_no_longer_applies(event: Event) -> None:
    """Events that can arrive after a request moved the plugin on (a stale instance, a stale timer)."""
    applies = {state for state in State if changes(state, event)}
    for state in set(State) - applies:
        assert TABLE[state, event] == (state, ()), (state, event)
    assert applies  # and each applies somewhere


def test_every_state_is_reachable_from_stopped() -> None:
    seen = {State.STOPPED}
    frontier = [State.STOPPED]
    while frontier:
        state = frontier.pop()
        for event in Event:
            if (state, event) in TABLE:
                next_state = TABLE[state, event][0]
                if next_state not in seen:
                    seen.add(next_state)
                    frontier.append(next_state)
    assert seen == set(State)


def walk(events: list[Event], start: State = State.STOPPED) -> list[State]:
    states = [start]
    for event in events:
        states.append(transition(states[-1], event)[0])
    return states


def test_a_cancelled_enable_and_a_cancelled_restart_end_stopped() -> None:
    assert walk([Event.ENABLE, Event.CANCEL]) == [State.STOPPED, State.STARTING, State.STOPPED]
    assert walk([Event.ENABLE, Event.STARTED, Event.RESTART, Event.CANCEL])[-1] is State.STOPPED
    assert walk([Event.ENABLE, Event.START_FAILED, Event.ENABLE, Event.CANCEL])[-1] is State.STOPPED
    # An automatic restart cut short (shutdown) too.
    assert walk([Event.ENABLE, Event.STARTED, Event.CRASH, Event.TIMER, Event.CANCEL])[-1] is State.STOPPED
    # Cut short while announcing ready (STARTED's notifications): the start's instance ends with it.
    assert walk([Event.ENABLE, Event.STARTED, Event.CANCEL])[-1] is State.STOPPED
    for state in (State.STARTING, State.READY):
        assert TABLE[state, Event.CANCEL][1] == (Action.STOP_INSTANCE, Action.CLEAR_ERROR, Action.NOTIFY_STATUS)


def test_a_crash_loop_backs_off_then_gives_up_until_a_request() -> None:
    states = walk(
        [
            Event.ENABLE,
            Event.STARTED,
            Event.CRASH,
            Event.TIMER,
            Event.RETRY_FAILED,
            Event.TIMER,
            Event.STARTED,
            Event.LIVENESS_FAILED,
            Event.GIVE_UP,
            Event.CRASH,  # a late report of the instance already stopped: ignored
            Event.RESTART,
            Event.STARTED,
        ]
    )
    assert [s.value for s in states] == [
        "stopped",
        "starting",
        "ready",
        "unhealthy",
        "starting",
        "error",
        "starting",
        "ready",
        "unhealthy",
        "error",
        "error",
        "starting",
        "ready",
    ]


def test_enable_of_a_ready_plugin_does_nothing_and_disable_of_a_stopped_one_says_nothing() -> None:
    assert transition(State.READY, Event.ENABLE) == (State.READY, ())
    assert transition(State.STOPPED, Event.DISABLE) == (State.STOPPED, (Action.CANCEL_RETRY, Action.STOP_INSTANCE))


def test_restart_counts_and_an_automatic_restart_is_saved() -> None:
    for state in (State.STOPPED, State.READY, State.UNHEALTHY, State.ERROR):
        assert Action.COUNT_RESTART in TABLE[state, Event.RESTART][1]
        assert Action.COUNT_RESTART not in TABLE[state, Event.ENABLE][1]
    for state in (State.UNHEALTHY, State.ERROR):
        _, actions = TABLE[state, Event.TIMER]
        assert actions.index(Action.COUNT_RESTART) < actions.index(Action.SAVE) < actions.index(Action.NOTIFY_STATUS)


def test_design_doc_shows_the_table_as_the_code_has_it() -> None:
    from pathlib import Path  # noqa: PLC0415

    design = (Path(__file__).resolve().parent.parent / "docs" / "design.md").read_text()
    assert render_table().rstrip() in design, "docs/design.md: paste hostd.plugins.lifecycle.render_table() again"
