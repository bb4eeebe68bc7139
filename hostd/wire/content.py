"""Aggregate bounds on the rich content of one tool result (sans-IO).

Theory of operation. The result bound (``max_result_bytes``) caps the size of
one result; it does not stop a plugin from sending a result that is *all*
media: 40 screenshots of 200 KB each fit under a few megabytes and flood a
chat window, an audio clip per call fills the parent's memory. So each result
also has aggregate bounds, per kind of rich item, settable by the parent at
``initialize`` (``contentLimits``):

- ``maxImages`` / ``maxAudio``: how many ``image`` / ``audio`` items;
- ``maxMediaBytes``: their total *decoded* size (base64 ``data`` counted as
  the bytes it decodes to);
- ``maxBlobBytes``: the total decoded size of embedded resource blobs
  (``{"type": "resource", "resource": {"blob": ...}}``).

Items are counted in order; the first item that would go over a bound, and
every later one of its kind that would too, is **replaced** by a text marker
that names its type, MIME type, decoded size and the bound, with the same
facts under ``_meta["hostd/omitted"]`` for a program: never silently dropped.
Text items and resource links are never touched. :func:`bound_content` is a
pure function: the caller forwards the plugin's own bytes when it returns
``None`` (nothing changed), and the returned list otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ContentLimits", "bound_content", "decoded_size"]


@dataclass(frozen=True)
class ContentLimits:
    """Aggregate bounds on one result's rich content (wire names in ``initialize``'s ``contentLimits``).

    ``max_images`` (``maxImages``, default 16), ``max_audio`` (``maxAudio``,
    default 4), ``max_media_bytes`` (``maxMediaBytes``, default 8 MiB: images
    and audio together, decoded), ``max_blob_bytes`` (``maxBlobBytes``, default
    8 MiB: embedded resource blobs, decoded). Each must be >= 0; 0 means none
    of that kind passes. Raises ``ValueError`` for a negative or non-integer
    bound.
    """

    max_images: int = 16
    max_audio: int = 4
    max_media_bytes: int = 8 * 1024 * 1024
    max_blob_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_images", "max_audio", "max_media_bytes", "max_blob_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")

    @classmethod
    def from_wire(cls, value: Mapping[str, Any] | None) -> ContentLimits:
        """Read ``initialize``'s ``contentLimits`` (camelCase keys; absent keys keep their defaults).

        Raises ``ValueError`` naming an unknown key or a bad value.
        """
        if not value:
            return cls()
        names = {"maxImages": "max_images", "maxAudio": "max_audio", "maxMediaBytes": "max_media_bytes"}
        names["maxBlobBytes"] = "max_blob_bytes"
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"contentLimits: unknown key {unknown[0]!r}; known: {', '.join(names)}")
        return cls(**{names[key]: item for key, item in value.items()})

    def to_wire(self) -> dict[str, int]:
        """The bounds in force, as ``initialize``'s result reports them."""
        return {
            "maxImages": self.max_images,
            "maxAudio": self.max_audio,
            "maxMediaBytes": self.max_media_bytes,
            "maxBlobBytes": self.max_blob_bytes,
        }


def decoded_size(data: str) -> int:
    """Bytes that the base64 text ``data`` decodes to (whitespace ignored; not validated)."""
    length = len(data) - sum(data.count(ch) for ch in " \t\r\n")
    padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    return max(0, length * 3 // 4 - padding)


def _marker(kind: str, mime: object, size: int, bound: str, limit: int) -> dict[str, Any]:
    mime_text = f" ({mime})" if isinstance(mime, str) else ""
    unit = "items" if bound in ("maxImages", "maxAudio") else "bytes"
    return {
        "type": "text",
        "text": f"[hostd: {kind}{mime_text} of {size} bytes omitted: over this result's {bound} of {limit} {unit}]",
        "_meta": {
            "hostd/omitted": {
                "type": kind,
                "mimeType": mime if isinstance(mime, str) else None,
                "bytes": size,
                "bound": bound,
                "limit": limit,
            }
        },
    }


def bound_content(content: Sequence[Any], limits: ContentLimits) -> list[Any] | None:
    """``content`` with every item over a bound replaced by a marker; ``None`` when nothing changed.

    ``content`` is a tool result's ``content`` list as parsed JSON (items that
    are not objects, or of unknown types, pass as they are). Work is linear in
    the number of items plus the length of their ``data``/``blob`` strings.
    """
    images = audio = media = blobs = 0
    out: list[Any] = []
    changed = False
    for item in content:
        if not isinstance(item, dict):
            out.append(item)
            continue
        kind = item.get("type")
        if kind in ("image", "audio") and isinstance(item.get("data"), str):
            size = decoded_size(item["data"])
            count, count_bound, count_limit = (
                (images, "maxImages", limits.max_images) if kind == "image" else (audio, "maxAudio", limits.max_audio)
            )
            if count + 1 > count_limit:
                out.append(_marker(kind, item.get("mimeType"), size, count_bound, count_limit))
                changed = True
                continue
            if media + size > limits.max_media_bytes:
                out.append(_marker(kind, item.get("mimeType"), size, "maxMediaBytes", limits.max_media_bytes))
                changed = True
                continue
            media += size
            if kind == "image":
                images += 1
            else:
                audio += 1
        elif kind == "resource" and isinstance(item.get("resource"), dict):
            resource = item["resource"]
            if isinstance(resource.get("blob"), str):
                size = decoded_size(resource["blob"])
                if blobs + size > limits.max_blob_bytes:
                    out.append(
                        _marker("resource", resource.get("mimeType"), size, "maxBlobBytes", limits.max_blob_bytes)
                    )
                    changed = True
                    continue
                blobs += size
        out.append(item)
    return out if changed else None
