"""No answer hostd writes exceeds the parent's line bound (8 MiB: hostd's Python and TypeScript clients) (issue 29).

The class: each answer is bounded by the rule of its method (a tool result by ``--max-result-bytes``, a
listing by hostd's pages), but nothing held the answer itself to the bound of the line the parent reads: a
result bound set over 8 MiB let a 9 MB tool result out as one line, which hostd's own clients cannot read,
so the call never ended for them. The last step of every answer now holds it to the line bound
(``ANSWER_TOO_LARGE`` in its place). Tried with a real hostd and the echo fixture's ``large`` tool.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from hostd.cli.client import RpcError
from hostd.wire.framing import PARENT_FRAME_LIMIT, encode
from tests.conftest import MakePlugin, ready, spawn_hostd
from tests.test_corpus_framing import HOSTILE, assert_healthy, enable_healthy


async def test_a_result_over_the_parents_line_bound_is_a_named_error_and_loses_nothing(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    size = 9_000_000  # under the result bound set here (12 MiB), over the line bound (8 MiB)
    async with spawn_hostd(tmp_path, "--max-result-bytes", str(12 * 1024 * 1024)) as hostd:
        with trio.fail_after(60):
            await enable_healthy(hostd, make_plugin)
            await ready(hostd, make_plugin())
            response = await hostd.start("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": size}})
            with pytest.raises(RpcError) as refused:
                await response()
            error = refused.value
            assert (error.kind, error.code) == ("ANSWER_TOO_LARGE", -32060)
            rid = response.request_id
            answer = {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "x" * size}]}}
            assert error.data["bytes"] == len(encode(answer))
            assert error.data["limit"] == PARENT_FRAME_LIMIT
            assert error.message == (
                f"hostd's answer is {len(encode(answer))} bytes, over the parent's {PARENT_FRAME_LIMIT}-byte line "
                "bound; this error was sent in its place"
            )
            # Under the line bound it arrives; the plugin and hostd go on serving.
            result = await hostd.request("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": 5_000_000}})
            assert result == {"content": [{"type": "text", "text": "x" * 5_000_000}]}
            await assert_healthy(hostd)
