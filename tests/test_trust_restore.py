"""``shutdown`` while hostd restores enabled plugins (issue 14).

The class: a restore start that something other than the plugin ended (``shutdown`` here; the
same path serves ``disable`` and ``uninstall``) is not a refusal. Each such plugin ends ``stopped``
with no error and keeps ``enabled: true`` in the state document, so the next hostd starts it again.
Members: plugins mid-start (spawned, handshake pending) and a plugin still queued behind the
restore's limit of 4 at a time (never spawned: it must not start after ``shutdown`` either).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import MakePlugin, spawn_hostd

SLOW = 5  # one more than the restore's 4 at a time


async def test_shutdown_during_restore_ends_starting_plugins_stopped_and_enabled(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    ids = [f"slow-{n}" for n in range(SLOW)]
    async with spawn_hostd(tmp_path) as first:
        for plugin_id in ids:
            folder = make_plugin(
                plugin_id, "slow-start", args=["--delay", "120"], backend={"startup_timeout_seconds": 120}
            )
            info = await first.request("plugins/install", {"path": str(folder)})
            await first.request("plugins/grant", {"id": plugin_id, "permissions": info["permissions"]})
            await first.request("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
    # As if the previous hostd ended with them enabled (starting them there would wait 120 s each).
    path = tmp_path / "state" / "state.json"
    document = json.loads(path.read_text())
    for plugin_id in ids:
        document["plugins"][plugin_id]["enabled"] = True
    path.write_text(json.dumps(document))

    async with spawn_hostd(tmp_path) as second:
        await second.wait_until(
            lambda: sum(s["status"] == "starting" for s in second.seen("plugins/statusChanged")) == 4
        )
        await second.request("shutdown", None)
        statuses = second.seen("plugins/statusChanged")
    # Every statusChanged hostd sent, in order, per plugin: nothing after "stopped", no "error".
    per_plugin = {
        plugin_id: [(s["status"], s["error"]) for s in statuses if s["plugin_id"] == plugin_id] for plugin_id in ids
    }
    started = sorted(plugin_id for plugin_id, seen in per_plugin.items() if seen)
    assert len(started) == 4
    for plugin_id in ids:
        expected = [("starting", None), ("stopped", None)] if plugin_id in started else []
        assert per_plugin[plugin_id] == expected, plugin_id
    saved = json.loads(path.read_text())["plugins"]
    assert {plugin_id: saved[plugin_id]["enabled"] for plugin_id in ids} == dict.fromkeys(ids, True)
