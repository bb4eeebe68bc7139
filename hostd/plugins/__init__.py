"""One plugin over time: the lifecycle table (sans-IO), the restart policy and ``list_changed`` pacing, the supervisor
that drives the table (``supervisor``), the running instance it starts and stops (``instance``; a process tree or a
remote connection behind one interface, ``backends``), the shaping of tool results (``results``), the events it tells
the host (``events``), the tool registry, and the trust model (approval digest, tool pins, what is withheld). May
import: ``hostd.mcp``, ``hostd.install``, ``hostd.control``, ``hostd.remote``, ``hostd.storage``, ``hostd.wire``,
``sandbox``.
"""
