"""The Python client of hostd's control protocol, for a parent application: :class:`HostdClient` and its helpers.

The stable place to import them from; the code lives in :mod:`hostd.cli.client` (docs/architecture.md, "Public
surface").
"""

from hostd.cli.client import HostdClient, Notification, RpcError, plugin_environment

__all__ = ["HostdClient", "Notification", "RpcError", "plugin_environment"]
