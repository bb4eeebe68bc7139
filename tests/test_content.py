"""Aggregate bounds on a result's rich content (hostd/wire/content.py): exact markers, nothing silently dropped."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.wire.content import ContentLimits, bound_content, decoded_size
from tests.conftest import ECHO_TOOLS, MakePlugin, ready


def image(size: int, mime: str = "image/png") -> dict[str, object]:
    return {"type": "image", "data": base64.b64encode(b"\x89" * size).decode(), "mimeType": mime}


def test_decoded_size_is_exact_for_every_padding() -> None:
    for size in range(0, 10):
        assert decoded_size(base64.b64encode(b"x" * size).decode()) == size
    assert decoded_size("aGVs\nbG8=") == 5


def test_nothing_changes_under_the_bounds() -> None:
    content = [{"type": "text", "text": "hi"}, image(10), {"type": "resource_link", "uri": "file:///x", "name": "x"}]
    assert bound_content(content, ContentLimits()) is None


def test_images_over_the_count_become_markers_in_place() -> None:
    content = [image(3), {"type": "text", "text": "between"}, image(4), image(5, "image/jpeg")]
    bounded = bound_content(content, ContentLimits(max_images=1))
    assert bounded == [
        content[0],
        {"type": "text", "text": "between"},
        {
            "type": "text",
            "text": "[hostd: image (image/png) of 4 bytes omitted: over this result's maxImages of 1 items]",
            "_meta": {
                "hostd/omitted": {
                    "type": "image",
                    "mimeType": "image/png",
                    "bytes": 4,
                    "bound": "maxImages",
                    "limit": 1,
                }
            },
        },
        {
            "type": "text",
            "text": "[hostd: image (image/jpeg) of 5 bytes omitted: over this result's maxImages of 1 items]",
            "_meta": {
                "hostd/omitted": {
                    "type": "image",
                    "mimeType": "image/jpeg",
                    "bytes": 5,
                    "bound": "maxImages",
                    "limit": 1,
                }
            },
        },
    ]


def test_media_bytes_count_images_and_audio_together_and_a_smaller_later_item_still_fits() -> None:
    audio = {"type": "audio", "data": base64.b64encode(b"a" * 40).decode(), "mimeType": "audio/wav"}
    content = [image(60), audio, image(30)]
    bounded = bound_content(content, ContentLimits(max_media_bytes=95))
    assert bounded is not None
    assert bounded[0] == content[0] and bounded[2] == content[2]
    assert bounded[1]["_meta"]["hostd/omitted"] == {
        "type": "audio",
        "mimeType": "audio/wav",
        "bytes": 40,
        "bound": "maxMediaBytes",
        "limit": 95,
    }


def test_resource_blobs_have_their_own_bound() -> None:
    blob = {"type": "resource", "resource": {"uri": "file:///b", "blob": base64.b64encode(b"b" * 20).decode()}}
    text = {"type": "resource", "resource": {"uri": "file:///t", "text": "t" * 1000}}
    bounded = bound_content([blob, text, blob], ContentLimits(max_blob_bytes=30))
    assert bounded is not None
    assert bounded[:2] == [blob, text]
    assert bounded[2]["text"] == "[hostd: resource of 20 bytes omitted: over this result's maxBlobBytes of 30 bytes]"


def test_wire_form_round_trips_and_refuses_unknown_or_bad_keys() -> None:
    limits = ContentLimits.from_wire({"maxImages": 2, "maxMediaBytes": 1000})
    assert limits.to_wire() == {"maxImages": 2, "maxAudio": 4, "maxMediaBytes": 1000, "maxBlobBytes": 8388608}
    assert ContentLimits.from_wire(None) == ContentLimits()
    with pytest.raises(ValueError, match="unknown key 'maxVideos'"):
        ContentLimits.from_wire({"maxVideos": 1})
    with pytest.raises(ValueError, match="max_audio must be a whole number >= 0"):
        ContentLimits.from_wire({"maxAudio": -1})


# -- end to end: the parent sets the bounds at initialize, hostd holds every result to them -----------


async def test_the_parents_content_limits_hold_a_plugins_result(tmp_path: Path, make_plugin: MakePlugin) -> None:
    from tests.test_limits import raw_call  # noqa: PLC0415  (the raw-replies helper)

    pixel = base64.b64encode(b"\x89PNG" + b"\x00" * 96).decode()
    result = {
        "content": [
            {"type": "text", "text": "three shots"},
            *({"type": "image", "data": pixel, "mimeType": "image/png"} for _ in range(3)),
        ]
    }
    shared = tmp_path / "shared"
    shared.mkdir()
    initialize = {"clientInfo": {"name": "t", "version": "0"}, "contentLimits": {"maxImages": 2}}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), "--allow-write", str(shared)],
        env=plugin_environment(),
        initialize=initialize,
    ) as hostd:
        await ready(hostd, make_plugin("mcp-echo", variant="raw-replies", tools=[*ECHO_TOOLS, "raw"]))
        answer = await raw_call(hostd, result=json.dumps(result))
    assert answer["content"][:3] == result["content"][:3]
    assert answer["content"][3] == {
        "type": "text",
        "text": "[hostd: image (image/png) of 100 bytes omitted: over this result's maxImages of 2 items]",
        "_meta": {
            "hostd/omitted": {"type": "image", "mimeType": "image/png", "bytes": 100, "bound": "maxImages", "limit": 2}
        },
    }


async def test_bad_content_limits_are_refused_at_initialize(tmp_path: Path) -> None:
    initialize = {"clientInfo": {"name": "t", "version": "0"}, "contentLimits": {"maxImages": -1}}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")], handshake=False) as hostd:
        with pytest.raises(RpcError) as refused:
            await hostd.request("initialize", initialize)
    assert refused.value.kind == "INVALID_PARAMS"
    assert refused.value.message == "contentLimits: max_images must be a whole number >= 0, not -1"
