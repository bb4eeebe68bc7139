"""The plugin manifest model and its loader, for a plugin author or a parent that checks manifests.

The stable place to import them from; the code lives in :mod:`hostd.install.manifest` (docs/architecture.md,
"Public surface").
"""

from hostd.install.manifest import (
    BUNDLE_SUFFIXES,
    MANIFEST_FILES,
    MANIFEST_MAX_BYTES,
    SCHEMA_ID,
    Backend,
    ClientFeature,
    ConditionalTool,
    Contributes,
    Manifest,
    ManifestError,
    Origin,
    UserConfigOption,
    load_manifest,
    manifest_json_schema,
    manifest_schema_text,
)

__all__ = [
    "BUNDLE_SUFFIXES",
    "MANIFEST_FILES",
    "MANIFEST_MAX_BYTES",
    "SCHEMA_ID",
    "Backend",
    "ClientFeature",
    "ConditionalTool",
    "Contributes",
    "Manifest",
    "ManifestError",
    "Origin",
    "UserConfigOption",
    "load_manifest",
    "manifest_json_schema",
    "manifest_schema_text",
]
