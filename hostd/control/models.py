"""Wire types of the control protocol (``docs/protocol.md``): params and results.

One pydantic model per method's params; :func:`parse_params` turns a
validation failure into ``INVALID_PARAMS`` naming each bad field. One model per
result and per shared wire type (:class:`PluginInfo`, :class:`Launch`,
:class:`PluginStatus`, :class:`HostTool`...): handlers build the model and send
:meth:`Wire.wire`, so a result cannot carry a field its model does not declare
(``extra="forbid"``), and ``docs/protocol.md``'s type tables are rendered from
these models (``python -m docgen.docs``), descriptions included: edit the
``Field(description=...)`` in the model, never the table.

Field order is wire order; field names or aliases are the wire's spelling
(``PluginInfo`` and ``Launch`` are camelCase, ``PluginStatus`` snake_case, as
shipped). A field in ``omit_none`` is left out when ``None``; every other
``None`` is sent as ``null``.

The models live in two parts: :mod:`hostd.control.params` (what the parent sends, :func:`parse_params`) and
:mod:`hostd.control.results` (what hostd sends); this module re-exports both under one name (most of hostd
imports it as ``p``) and holds the method tables below.
"""

from __future__ import annotations

from pydantic import BaseModel

from hostd.control.params import (
    ApproveParams,
    AuthCallbackParams,
    CancelParams,
    ClientInfo,
    CompleteParams,
    ConfigureParams,
    ContentLimitsParams,
    Empty,
    FolderGrants,
    GrantParams,
    GrantPathParams,
    ImportParams,
    InitializeParams,
    InstallParams,
    Limits,
    LogsParams,
    OAuthSettings,
    P,
    ParentCapabilities,
    ParentFeature,
    PluginPageParams,
    PluginRef,
    PrepareParams,
    PromptsGetParams,
    PromptsListParams,
    ResourceParams,
    RevokePathParams,
    SetLogLevelParams,
    ToolsCallParams,
    ToolSetEnabledParams,
    ToolsListParams,
    parse_params,
)
from hostd.control.results import (
    Accounting,
    Capabilities,
    CapabilitySet,
    CompleteResult,
    ConfigItem,
    ContentLimitsWire,
    FolderCapability,
    GetPromptResult,
    GrantAnswer,
    GrantedLimits,
    GrantRequestParams,
    HostTool,
    ImportEntry,
    ImportResult,
    InitializeResult,
    InitializeServerInfo,
    Launch,
    LaunchUnresolved,
    ListChangedParams,
    LogLine,
    LogParams,
    LogsResult,
    NetworkAllowlist,
    NetworkAnswer,
    NetworkCapability,
    NetworkRequestParams,
    PackageCapability,
    PackageVersion,
    PagedResult,
    PluginCapabilities,
    PluginInfo,
    PluginNoteParams,
    PluginsListResult,
    PluginStatus,
    Preparation,
    ProgressParams,
    ReadResourceResult,
    RemoteEndpoint,
    RequestedPath,
    ResourceUpdatedParams,
    RootsRequestParams,
    SamplingRequestParams,
    SecretCapability,
    ShimNote,
    StateRecord,
    ToolCapabilities,
    ToolEnabledResult,
    ToolsCallResult,
    ToolsListResult,
    Wire,
)

__all__ = [
    "NOTIFICATIONS",
    "PARAMS",
    "PARENT_NOTIFICATIONS",
    "PARENT_REQUESTS",
    "PARENT_RESULTS",
    "RESULTS",
    "Accounting",
    "ApproveParams",
    "AuthCallbackParams",
    "CancelParams",
    "Capabilities",
    "CapabilitySet",
    "ClientInfo",
    "CompleteParams",
    "CompleteResult",
    "ConfigItem",
    "ConfigureParams",
    "ContentLimitsParams",
    "ContentLimitsWire",
    "Empty",
    "FolderCapability",
    "FolderGrants",
    "GetPromptResult",
    "GrantAnswer",
    "GrantParams",
    "GrantPathParams",
    "GrantRequestParams",
    "GrantedLimits",
    "HostTool",
    "ImportEntry",
    "ImportParams",
    "ImportResult",
    "InitializeParams",
    "InitializeResult",
    "InitializeServerInfo",
    "InstallParams",
    "Launch",
    "LaunchUnresolved",
    "Limits",
    "ListChangedParams",
    "LogLine",
    "LogParams",
    "LogsParams",
    "LogsResult",
    "NetworkAllowlist",
    "NetworkAnswer",
    "NetworkCapability",
    "NetworkRequestParams",
    "OAuthSettings",
    "P",
    "PackageCapability",
    "PackageVersion",
    "PagedResult",
    "ParentCapabilities",
    "ParentFeature",
    "PluginCapabilities",
    "PluginInfo",
    "PluginNoteParams",
    "PluginPageParams",
    "PluginRef",
    "PluginStatus",
    "PluginsListResult",
    "Preparation",
    "PrepareParams",
    "ProgressParams",
    "PromptsGetParams",
    "PromptsListParams",
    "ReadResourceResult",
    "RemoteEndpoint",
    "RequestedPath",
    "ResourceParams",
    "ResourceUpdatedParams",
    "RevokePathParams",
    "RootsRequestParams",
    "SamplingRequestParams",
    "SecretCapability",
    "SetLogLevelParams",
    "ShimNote",
    "StateRecord",
    "ToolCapabilities",
    "ToolEnabledResult",
    "ToolSetEnabledParams",
    "ToolsCallParams",
    "ToolsCallResult",
    "ToolsListParams",
    "ToolsListResult",
    "Wire",
    "parse_params",
]

# -- the method registry (hostd.control.openrpc builds docs/openrpc.json from these tables) ------------------
#
# Adding a method: its params model in PARAMS and its result in RESULTS (a request the parent sends), or in
# NOTIFICATIONS (hostd -> parent) or PARENT_NOTIFICATIONS (parent -> hostd). Requests hostd sends the parent
# go in a table PARENT_REQUESTS (method -> params type), with their result types, where known, in
# PARENT_RESULTS; hostd.control.openrpc reads both when they are defined. tests/test_openrpc.py fails while a served
# method is missing.

#: The result type of each method, for docs and schemas (``None``: the result is ``null``; ``{}``: ``Empty``).
RESULTS: dict[str, type[BaseModel] | None] = {
    "initialize": InitializeResult,
    "ping": Empty,
    "shutdown": None,
    "plugins/install": PluginInfo,
    "plugins/import": ImportResult,
    "plugins/uninstall": None,
    "plugins/list": PluginsListResult,
    "plugins/grant": PluginInfo,
    "plugins/grantPath": PluginInfo,
    "plugins/revokePath": PluginInfo,
    "plugins/prepare": PluginInfo,
    "plugins/approve": PluginInfo,
    "plugins/configure": PluginInfo,
    "plugins/enable": PluginStatus,
    "plugins/disable": PluginStatus,
    "plugins/restart": PluginStatus,
    "plugins/status": PluginStatus,
    "plugins/logs": LogsResult,
    "tools/list": ToolsListResult,
    "tools/call": ToolsCallResult,
    "resources/list": PagedResult,
    "resources/templates/list": PagedResult,
    "resources/read": ReadResourceResult,
    "resources/subscribe": Empty,
    "resources/unsubscribe": Empty,
    "prompts/list": PagedResult,
    "prompts/get": GetPromptResult,
    "completion/complete": CompleteResult,
    "plugins/setLogLevel": Empty,
    "tools/setEnabled": ToolEnabledResult,
    "plugins/logout": PluginStatus,
    "auth/callback": Empty,
}

#: Requests hostd sends the parent (client features), by method: their params type.
PARENT_REQUESTS: dict[str, type[BaseModel]] = {
    "sampling/createMessage": SamplingRequestParams,
    "elicitation/create": SamplingRequestParams,
    "roots/list": RootsRequestParams,
    "grants/request": GrantRequestParams,
    "network/request": NetworkRequestParams,
}

#: The result type of each request hostd sends the parent, where hostd reads it (the others go to the server).
PARENT_RESULTS: dict[str, type[BaseModel]] = {"grants/request": GrantAnswer, "network/request": NetworkAnswer}

#: The params type of each notification hostd sends.
NOTIFICATIONS: dict[str, type[BaseModel]] = {
    "plugins/statusChanged": PluginStatus,
    "tools/listChanged": ListChangedParams,
    "plugins/log": LogParams,
    "$/progress": ProgressParams,
    "resources/updated": ResourceUpdatedParams,
    "resources/listChanged": PluginNoteParams,
    "prompts/listChanged": PluginNoteParams,
}

#: The params type of each request the parent sends (``Empty``: no params).
PARAMS: dict[str, type[BaseModel]] = {
    "initialize": InitializeParams,
    "ping": Empty,
    "shutdown": Empty,
    "plugins/install": InstallParams,
    "plugins/import": ImportParams,
    "plugins/uninstall": PluginRef,
    "plugins/list": Empty,
    "plugins/grant": GrantParams,
    "plugins/grantPath": GrantPathParams,
    "plugins/revokePath": RevokePathParams,
    "plugins/approve": ApproveParams,
    "plugins/enable": PluginRef,
    "plugins/disable": PluginRef,
    "plugins/restart": PluginRef,
    "plugins/status": PluginRef,
    "tools/list": ToolsListParams,
    "tools/call": ToolsCallParams,
    "tools/setEnabled": ToolSetEnabledParams,
    "plugins/configure": ConfigureParams,
    "plugins/prepare": PrepareParams,
    "plugins/logout": PluginRef,
    "auth/callback": AuthCallbackParams,
    "plugins/logs": LogsParams,
    "plugins/setLogLevel": SetLogLevelParams,
    "resources/list": PluginPageParams,
    "resources/templates/list": PluginPageParams,
    "resources/read": ResourceParams,
    "resources/subscribe": ResourceParams,
    "resources/unsubscribe": ResourceParams,
    "prompts/list": PromptsListParams,
    "prompts/get": PromptsGetParams,
    "completion/complete": CompleteParams,
}

#: The params type of each notification the parent sends.
PARENT_NOTIFICATIONS: dict[str, type[BaseModel]] = {
    "initialized": Empty,
    "$/cancelRequest": CancelParams,
    "exit": Empty,
}
