"""A plugin's lifecycle as a pure (state, event) -> (state, actions) table: no I/O, no trio.

Two rules:

1. Every way a plugin's state changes is an :class:`Event` fed to
   :func:`transition`, which returns the next :class:`State` and the
   :class:`Action` s to perform, in order. Nothing else sets the state.
2. Every (state, event) pair has one defined outcome: an entry of
   :data:`TABLE` (a pair with no effect is an explicit entry with no
   actions), or an entry of :data:`UNREACHABLE`, which says why the driver
   never feeds it; feeding it anyway raises :class:`LifecycleError`.

Theory of operation
-------------------

:class:`hostd.plugins.supervisor.PluginSupervisor` is the driver. It turns what
happens (a request, the end of a start, the link's end, the watchdog, the
liveness ping, a re-discovery, the restart timer) into events, feeds them
here, stores the returned state at once, then performs the actions in the
order given (spawning, stopping, notifying the parent, registering tools,
arming the restart timer). The supervisor's only way to tell the host
anything is a notification; it never calls back into the host for a state
change.

Requests (enable, restart, disable) are serialised by the supervisor's
operation lock, and a start holds that lock until it ends, so a request
never meets ``starting``: those pairs are :data:`UNREACHABLE`. A start ends
in exactly one of ``STARTED``, ``START_FAILED`` / ``RETRY_FAILED`` or
``CANCEL``; ``CANCEL`` covers every way a start is cut short from outside
(the parent's ``$/cancelRequest`` of the enable or restart, a disable or
uninstall abandoning it, hostd's shutdown), and ends ``stopped``: a start
that is cancelled never leaves the plugin ``starting`` (issue 11), nor
``ready`` with nothing running when the cancellation came while the start
was announcing ready.

Failures of a running instance (``CRASH`` ... ``LIST_REFUSED``) matter only
in ``ready``: in any other state they come from an instance already being
stopped, and are ignored. Likewise a restart timer (``TIMER``), a give-up
(``GIVE_UP``) or a refused automatic restart (``RETRY_REFUSED``) that
arrives after a request moved the plugin on is ignored.

Preconditions are not events: a request the host refuses (permissions not
granted, launch not approved) or a start whose tool names conflict with
another plugin's (``TOOL_CONFLICT``) is answered with an error and changes
nothing. At an automatic restart the same checks give ``RETRY_REFUSED``.

The table (rows: events; columns: the state the event meets; cells: the
next state, ``=`` unchanged and nothing done, ``-`` unreachable)::

    event            | stopped    | starting   | ready      | unhealthy  | error
    -----------------+------------+------------+------------+------------+------
    ENABLE           | starting   | -          | =          | starting   | starting
    RESTART          | starting   | -          | starting   | starting   | starting
    DISABLE          | stopped    | -          | stopped    | stopped    | stopped
    CANCEL           | =          | stopped    | stopped    | =          | =
    STARTED          | -          | ready      | -          | -          | -
    START_FAILED     | -          | error      | -          | -          | -
    RETRY_FAILED     | -          | error      | -          | -          | -
    CRASH            | =          | =          | unhealthy  | =          | =
    STDOUT_VIOLATION | =          | =          | unhealthy  | =          | =
    LIVENESS_FAILED  | =          | =          | unhealthy  | =          | =
    LIMIT_EXCEEDED   | =          | =          | unhealthy  | =          | =
    LIST_REFUSED     | =          | =          | unhealthy  | =          | =
    LIST_CHANGED     | =          | =          | ready      | =          | =
    TIMER            | =          | =          | =          | starting   | starting
    RETRY_REFUSED    | =          | =          | =          | error      | error
    GIVE_UP          | =          | =          | =          | error      | =
    REFUSE           | error      | =          | =          | =          | error

Actions, in order, wherever the event is not ``=`` or ``-``:

- ENABLE, RESTART: cancel_retry, reset_policy, stop_instance,
  [RESTART: count_restart], clear_error, notify_status, spawn.
  ENABLE in ``ready``: nothing (the answer is the status).
- DISABLE: cancel_retry, stop_instance, clear_error, notify_status
  (in ``stopped``: cancel_retry, stop_instance; nothing to tell).
- CANCEL (in ``starting`` and ``ready``): stop_instance, clear_error,
  notify_status.
- STARTED: clear_error, notify_status, announce_tools.
- START_FAILED: record_error, notify_status.
  RETRY_FAILED (an automatic start): the same, then apply_restart_policy.
- CRASH, STDOUT_VIOLATION, LIVENESS_FAILED, LIMIT_EXCEEDED, LIST_REFUSED:
  unregister_tools, record_error, notify_status, stop_instance,
  apply_restart_policy.
- LIST_CHANGED: announce_tools, notify_status.
- TIMER: count_restart, save, clear_error, notify_status, spawn.
- RETRY_REFUSED, GIVE_UP, REFUSE: record_error, notify_status.

``apply_restart_policy`` asks :class:`hostd.plugins.restart.RestartPolicy`: a delay
arms the timer (``TIMER`` when it fires; the status shows ``next_retry_at``),
``None`` feeds ``GIVE_UP`` (mode ``on-failure``) or nothing (mode
``never``: the plugin stays ``unhealthy`` until a request).
"""

from __future__ import annotations

from enum import Enum


class State(Enum):
    """A plugin's lifecycle state (``PluginStatus.status``)."""

    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"
    ERROR = "error"


class Event(Enum):
    """Something that happened to a plugin, as the driver reports it."""

    #: ``plugins/enable`` (or hostd's start restoring an enabled plugin).
    ENABLE = "enable"
    #: ``plugins/restart``.
    RESTART = "restart"
    #: ``plugins/disable``, ``plugins/uninstall``, hostd's shutdown.
    DISABLE = "disable"
    #: A start cut short from outside: ``$/cancelRequest`` of its request, a disable, shutdown.
    CANCEL = "cancel"
    #: The handshake and the tool listing were accepted; the tools are registered.
    STARTED = "started"
    #: A start a request asked for failed (the request is answered with the error).
    START_FAILED = "start failed"
    #: An automatic start (after ``TIMER``) failed; the restart policy decides what next.
    RETRY_FAILED = "retry failed"
    #: The running instance exited or closed a pipe.
    CRASH = "crash"
    #: The running instance wrote something on stdout that is not a valid frame.
    STDOUT_VIOLATION = "stdout violation"
    #: The running instance did not answer ``ping`` in time.
    LIVENESS_FAILED = "liveness failed"
    #: The watchdog found the instance over a resource limit (RSS, CPU, disk).
    LIMIT_EXCEEDED = "limit exceeded"
    #: A re-discovery after ``list_changed`` was refused or timed out.
    LIST_REFUSED = "list refused"
    #: A re-discovery (or a new approval) changed the registered tools.
    LIST_CHANGED = "list changed"
    #: The restart timer armed by ``apply_restart_policy`` fired.
    TIMER = "timer"
    #: An automatic restart could not be attempted (launch no longer approved, a tool name conflict).
    RETRY_REFUSED = "retry refused"
    #: The restart policy gave up (too many restarts within its window).
    GIVE_UP = "give up"
    #: hostd's start did not restore an enabled plugin (its manifest changed, its launch failed).
    REFUSE = "refuse"


class Action(Enum):
    """What the driver does after a transition, in the order given."""

    #: Disarm the restart timer; ``next_retry_at`` becomes null.
    CANCEL_RETRY = "cancel_retry"
    #: Forget past failures (an explicit request by the user).
    RESET_POLICY = "reset_policy"
    #: End the running instance, if any: unregister its tools, close stdin, wait, terminate, kill, empty TMPDIR.
    STOP_INSTANCE = "stop_instance"
    #: ``restarts += 1``.
    COUNT_RESTART = "count_restart"
    #: Write the state document (the restart count); a failure is logged, never fatal.
    SAVE = "save"
    #: ``error`` becomes null.
    CLEAR_ERROR = "clear_error"
    #: ``error`` becomes the error that came with the event.
    RECORD_ERROR = "record_error"
    #: Send ``plugins/statusChanged`` with the status as it is now.
    NOTIFY_STATUS = "notify_status"
    #: Spawn a new instance; its end is ``STARTED``, ``START_FAILED``/``RETRY_FAILED`` or ``CANCEL``.
    SPAWN = "spawn"
    #: Send ``tools/listChanged`` (the registry changed).
    ANNOUNCE_TOOLS = "announce_tools"
    #: Take the instance's tools out of the registry now (and announce it if any were there).
    UNREGISTER_TOOLS = "unregister_tools"
    #: Ask the restart policy: arm the timer, feed ``GIVE_UP``, or (mode ``never``) nothing.
    APPLY_RESTART_POLICY = "apply_restart_policy"


class LifecycleError(Exception):
    """An event fed in a state where the driver never feeds it (a bug in the driver)."""

    def __init__(self, state: State, event: Event, why: str) -> None:
        super().__init__(f"event {event.name} in state {state.value}: {why}")
        self.state = state
        self.event = event


Outcome = tuple[State, tuple[Action, ...]]

_A = Action
_START = (_A.CANCEL_RETRY, _A.RESET_POLICY, _A.STOP_INSTANCE, _A.CLEAR_ERROR, _A.NOTIFY_STATUS, _A.SPAWN)
_RESTART = (
    _A.CANCEL_RETRY,
    _A.RESET_POLICY,
    _A.STOP_INSTANCE,
    _A.COUNT_RESTART,
    _A.CLEAR_ERROR,
    _A.NOTIFY_STATUS,
    _A.SPAWN,
)
_STOP = (_A.CANCEL_RETRY, _A.STOP_INSTANCE, _A.CLEAR_ERROR, _A.NOTIFY_STATUS)
_FAILED = (_A.UNREGISTER_TOOLS, _A.RECORD_ERROR, _A.NOTIFY_STATUS, _A.STOP_INSTANCE, _A.APPLY_RESTART_POLICY)
_RECORD = (_A.RECORD_ERROR, _A.NOTIFY_STATUS)
_RETRY = (_A.COUNT_RESTART, _A.SAVE, _A.CLEAR_ERROR, _A.NOTIFY_STATUS, _A.SPAWN)

#: The failures of a running instance: the same outcome, a different ``error``.
INSTANCE_FAILURES = (
    Event.CRASH,
    Event.STDOUT_VIOLATION,
    Event.LIVENESS_FAILED,
    Event.LIMIT_EXCEEDED,
    Event.LIST_REFUSED,
)

_S = State
_E = Event

#: Why a request never meets ``starting``.
_SERIALISED = "requests wait for the operation lock, which a start holds until it ends"
#: Why a start's end is only ever fed in ``starting``.
_START_ENDS = "only the start in progress reports its end, and nothing else leaves starting meanwhile"


def _build() -> tuple[dict[tuple[State, Event], Outcome], dict[tuple[State, Event], str]]:
    table: dict[tuple[State, Event], Outcome] = {}
    unreachable: dict[tuple[State, Event], str] = {}
    for state in State:
        if state is _S.STARTING:
            for event in (_E.ENABLE, _E.RESTART, _E.DISABLE):
                unreachable[state, event] = _SERIALISED
        else:
            table[state, _E.ENABLE] = (_S.READY, ()) if state is _S.READY else (_S.STARTING, _START)
            table[state, _E.RESTART] = (_S.STARTING, _RESTART)
            table[state, _E.DISABLE] = (
                (_S.STOPPED, (_A.CANCEL_RETRY, _A.STOP_INSTANCE)) if state is _S.STOPPED else (_S.STOPPED, _STOP)
            )
        if state in (_S.STARTING, _S.READY):
            # In ready: the start was cut short while it announced ready (STARTED's notifications);
            # its instance, still the start's, ends with it. The driver feeds CANCEL only for the
            # start it is running, never once the start has handed its instance over.
            table[state, _E.CANCEL] = (_S.STOPPED, (_A.STOP_INSTANCE, _A.CLEAR_ERROR, _A.NOTIFY_STATUS))
        else:
            table[state, _E.CANCEL] = (state, ())  # the start already ended: nothing to cut short
        if state is _S.STARTING:
            table[state, _E.STARTED] = (_S.READY, (_A.CLEAR_ERROR, _A.NOTIFY_STATUS, _A.ANNOUNCE_TOOLS))
            table[state, _E.START_FAILED] = (_S.ERROR, _RECORD)
            table[state, _E.RETRY_FAILED] = (_S.ERROR, (*_RECORD, _A.APPLY_RESTART_POLICY))
        else:
            for event in (_E.STARTED, _E.START_FAILED, _E.RETRY_FAILED):
                unreachable[state, event] = _START_ENDS
        for event in INSTANCE_FAILURES:
            # Outside ready: reported by an instance already being stopped (or by none).
            table[state, event] = (_S.UNHEALTHY, _FAILED) if state is _S.READY else (state, ())
        table[state, _E.LIST_CHANGED] = (
            (_S.READY, (_A.ANNOUNCE_TOOLS, _A.NOTIFY_STATUS)) if state is _S.READY else (state, ())
        )
        waiting = state in (_S.UNHEALTHY, _S.ERROR)  # where the restart policy's timer may be armed
        table[state, _E.TIMER] = (_S.STARTING, _RETRY) if waiting else (state, ())
        table[state, _E.RETRY_REFUSED] = (_S.ERROR, _RECORD) if waiting else (state, ())
        table[state, _E.GIVE_UP] = (_S.ERROR, _RECORD) if state is _S.UNHEALTHY else (state, ())
        table[state, _E.REFUSE] = (_S.ERROR, _RECORD) if state in (_S.STOPPED, _S.ERROR) else (state, ())
    return table, unreachable


#: The outcome of every (state, event) pair the driver feeds.
TABLE: dict[tuple[State, Event], Outcome]
#: The (state, event) pairs the driver never feeds, with the reason.
UNREACHABLE: dict[tuple[State, Event], str]
TABLE, UNREACHABLE = _build()


def transition(state: State, event: Event) -> Outcome:
    """The next state and the actions to perform, in order, for ``event`` met in ``state``.

    Pure: no side effect. Raises :class:`LifecycleError` for a pair in
    :data:`UNREACHABLE` (the driver fed an event it never feeds there).
    """
    outcome = TABLE.get((state, event))
    if outcome is None:
        raise LifecycleError(state, event, UNREACHABLE.get((state, event), "no entry in the table"))
    return outcome


def render_table() -> str:
    """The table of next states as printed in this module's header (one line per event)."""
    width = max(len(e.name) for e in Event)
    columns = [s.value for s in State]
    cell = max(len(c) for c in columns) + 1
    lines = [" | ".join([f"{'event':<{width}}", *(f"{c:<{cell}}" for c in columns)]).rstrip()]
    lines.append("".join("+" if ch == "|" else "-" for ch in lines[0]))
    for event in Event:
        cells = []
        for state in State:
            outcome = TABLE.get((state, event))
            if outcome is None:
                text = "-"
            elif outcome[0] is state and not outcome[1]:
                text = "="
            else:
                text = outcome[0].value
            cells.append(f"{text:<{cell}}")
        lines.append(" | ".join([f"{event.name:<{width}}", *cells]).rstrip())
    return "\n".join(lines)
