"""sandbox: process isolation for plugin process trees, importable on its own.

It never imports ``hostd``. It offers an environment policy, launch
resolution (a value object with a stable digest), spawning through a
per-plugin supervisor shim, kernel isolation layers (Landlock, a user +
network namespace, seccomp) applied inside the shim's child, a resource
watchdog, and whole-tree termination. ``sandbox/README.md`` describes each
layer, what is weaker on macOS, and the honest limits.

- :mod:`sandbox.environment`: :class:`EnvPolicy`, :func:`build_environment`.
- :mod:`sandbox.policy`: :class:`IsolationPolicy`, :class:`IsolationPlan`, :func:`plan_layers`.
- :mod:`sandbox.probe`: :func:`probe`, :class:`Capability`, :func:`render_table`.
- :mod:`sandbox.launch`: :class:`Launch`, :func:`resolve_launch`, :class:`LaunchError`.
- :mod:`sandbox.process`: :func:`spawn`, :class:`SandboxedProcess`, :class:`StopReport`.
- :mod:`sandbox.sweep`: the per-instance token, :func:`sweep_leftovers`, :func:`sweep_orphans`.
- :mod:`sandbox.forkserver`: the shim's fork server (used by :mod:`sandbox.process`).
- :mod:`sandbox.watchdog`: :func:`watch`, :class:`LimitHit`.
- ``sandbox/shim.py``: the supervisor, run by path, never imported; it loads
  ``_landlock.py`` and ``_seccomp.py`` (stdlib only) by path.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.environment import EnvironmentPolicyError, EnvPolicy, build_environment
    from sandbox.launch import Launch, LaunchError, resolve_launch
    from sandbox.policy import IsolationPlan, IsolationPolicy, IsolationUnavailable
    from sandbox.probe import Capability, probe, render_table
    from sandbox.process import SandboxedProcess, StopReport, spawn
    from sandbox.sweep import sweep_leftovers, sweep_orphans
    from sandbox.watchdog import LimitHit, watch

#: Where each name of ``__all__`` lives. The package loads none of them itself (PEP 562 ``__getattr__``):
#: importing one submodule (``sandbox.launch`` for a :class:`Launch`, as a reader of hostd's state does) does
#: not load the process, the watchdog and the fork server with it.
_HOME = {
    "EnvironmentPolicyError": "sandbox.environment",
    "EnvPolicy": "sandbox.environment",
    "build_environment": "sandbox.environment",
    "Launch": "sandbox.launch",
    "LaunchError": "sandbox.launch",
    "resolve_launch": "sandbox.launch",
    "IsolationPlan": "sandbox.policy",
    "IsolationPolicy": "sandbox.policy",
    "IsolationUnavailable": "sandbox.policy",
    "Capability": "sandbox.probe",
    "probe": "sandbox.probe",
    "render_table": "sandbox.probe",
    "SandboxedProcess": "sandbox.process",
    "StopReport": "sandbox.process",
    "spawn": "sandbox.process",
    "sweep_leftovers": "sandbox.sweep",
    "sweep_orphans": "sandbox.sweep",
    "LimitHit": "sandbox.watchdog",
    "watch": "sandbox.watchdog",
}


class _Package(types.ModuleType):
    """The package's module type: ``sandbox.probe`` is the function :func:`sandbox.probe.probe`, as when this
    package imported every name, not the submodule that the import system binds under the same name when it
    loads ``sandbox.probe`` (``probe`` is the one name of ``__all__`` that is also a submodule's)."""

    @property
    def probe(self) -> Any:
        """:func:`sandbox.probe.probe`."""
        return importlib.import_module("sandbox.probe").probe

    @probe.setter
    def probe(self, module: Any) -> None:
        del module  # the submodule, bound by its import: the name stays the function's


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """``sandbox.<name>`` for a name of ``__all__``: its module imported at first use (raises
    :class:`AttributeError` for any other name, as a module does)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "Capability",
    "EnvPolicy",
    "EnvironmentPolicyError",
    "IsolationPlan",
    "IsolationPolicy",
    "IsolationUnavailable",
    "Launch",
    "LaunchError",
    "LimitHit",
    "SandboxedProcess",
    "StopReport",
    "build_environment",
    "probe",
    "render_table",
    "resolve_launch",
    "spawn",
    "sweep_leftovers",
    "sweep_orphans",
    "watch",
]
