"""Supervision rules with no I/O in them: restart backoff and re-discovery pacing.

Both are plain objects fed timestamps (seconds, ``time.monotonic()``) and
asked for decisions, so every rule is tested with function calls.

:class:`RestartPolicy` — after a crash, restart with exponential backoff
(0.5 s · 2ⁿ, ±20 % jitter, capped at 30 s); at most ``max_restarts``
automatic restarts within ``window`` seconds, then give up (state ``error``
until an explicit ``plugins/restart``); 60 s of health resets the count.
``mode = "never"`` never restarts on its own.

:class:`RefreshPacer` — ``notifications/tools/list_changed`` is coalesced:
at most one ``tools/list`` walk in flight and one queued, walks at least
``min_interval`` apart, and a server that answers every walk with another
``list_changed`` while its tools stay the same (a feedback loop, case C4b) is
detected after ``loop_threshold`` such walks: automatic refresh stops.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

RestartMode = Literal["on-failure", "never"]


@dataclass
class RestartPolicy:
    """Decides whether and when to restart a plugin after a failure.

    ``record_failure(now)`` returns the delay in seconds before the next
    automatic restart, or ``None`` when the policy gives up.
    """

    mode: RestartMode = "on-failure"
    max_restarts: int = 5
    window: float = 60.0
    base_delay: float = 0.5
    max_delay: float = 30.0
    healthy_reset: float = 60.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)
    _failures: list[float] = field(default_factory=list)

    def record_failure(self, now: float) -> float | None:
        """A crash or failed start at ``now``; the backoff delay, or None to give up."""
        if self.mode == "never":
            return None
        self._failures = [t for t in self._failures if now - t < self.window]
        if len(self._failures) >= self.max_restarts:
            return None
        attempt = len(self._failures)
        self._failures.append(now)
        delay = min(self.max_delay, self.base_delay * (2**attempt))
        return float(delay * (1 + self.rng.uniform(-self.jitter, self.jitter)))

    def record_healthy(self, since: float, now: float) -> None:
        """The plugin has been ready since ``since``; forget failures after ``healthy_reset`` s."""
        if now - since >= self.healthy_reset:
            self._failures.clear()

    def reset(self) -> None:
        """Forget every failure (an explicit enable or restart by the user)."""
        self._failures.clear()


@dataclass
class RefreshPacer:
    """Coalesces ``list_changed`` notifications into a bounded number of walks."""

    min_interval: float = 0.5
    loop_threshold: int = 3
    loop_window: float = 1.0
    requested: bool = False
    stopped: bool = False
    walks: int = 0
    _last_walk_end: float | None = None
    _unchanged_echoes: int = 0

    def notify(self, now: float) -> bool:
        """A ``list_changed`` arrived; True when a walk should be (or stay) queued."""
        if self.stopped:
            return False
        self.requested = True
        return True

    def next_walk_delay(self, now: float) -> float:
        """Seconds to wait before starting the queued walk (0 when it may start now)."""
        if self._last_walk_end is None:
            return 0.0
        return max(0.0, self._last_walk_end + self.min_interval - now)

    def begin_walk(self) -> None:
        """A walk starts: it answers every notification received so far."""
        self.requested = False
        self.walks += 1

    def end_walk(self, now: float, *, changed: bool) -> bool:
        """A walk ended; ``changed`` says whether the tool set changed.

        Returns False when a feedback loop was detected (and refresh stopped):
        ``loop_threshold`` walks in a row that found nothing new, each asked
        for by a notification that came within ``loop_window`` s of the
        previous walk's end.
        """
        echo = (
            not changed
            and self._last_walk_end is not None
            and now - self._last_walk_end < self.loop_window + self.min_interval
        )
        self._unchanged_echoes = self._unchanged_echoes + 1 if echo else 0
        self._last_walk_end = now
        if self._unchanged_echoes >= self.loop_threshold:
            self.stopped = True
            self.requested = False
            return False
        return True
