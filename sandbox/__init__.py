"""sandbox: process isolation for plugin process trees, importable on its own.

It never imports ``hostd``. It offers an environment policy, launch
resolution (a value object with a stable digest), spawning through a
per-plugin supervisor shim, resource limits and whole-tree termination.

- :mod:`sandbox.environment`: :class:`EnvPolicy`, :func:`build_environment`.
- :mod:`sandbox.launch`: :class:`Launch`, :func:`resolve_launch`, :class:`LaunchError`.
- :mod:`sandbox.process`: :func:`spawn`, :class:`SandboxedProcess`, :class:`StopReport`,
  :func:`sweep_leftovers`, :func:`sweep_orphans`.
- ``sandbox/shim.py``: the supervisor, run by path, never imported.
"""

from sandbox.environment import EnvironmentPolicyError, EnvPolicy, build_environment
from sandbox.launch import Launch, LaunchError, resolve_launch
from sandbox.process import SandboxedProcess, StopReport, spawn, sweep_leftovers, sweep_orphans

__all__ = [
    "EnvPolicy",
    "EnvironmentPolicyError",
    "Launch",
    "LaunchError",
    "SandboxedProcess",
    "StopReport",
    "build_environment",
    "resolve_launch",
    "spawn",
    "sweep_leftovers",
    "sweep_orphans",
]
