"""The MCP conformance suite's fixture server ("everything server"), on the official Python SDK,
for test_hub_conformance.py: `python conformance_server.py PORT` serves Streamable HTTP on
`http://127.0.0.1:PORT/mcp`.

`@modelcontextprotocol/conformance` (0.1.x) runs its server scenarios against a server that has
fixed tools, resources and prompts (`test_simple_text`, `test://static-text`,
`test_simple_prompt`, …); the fixture itself is not published on npm. This file implements what
each server scenario of the suite's `dist/index.js` calls and checks:

- tools: `test_simple_text`, `test_image_content`, `test_audio_content`,
  `test_embedded_resource`, `test_multiple_content_types`, `test_tool_with_logging` (3 info logs
  ~50 ms apart), `test_tool_with_progress` (0/50/100 of 100 when a progress token is sent),
  `test_error_handling` (`isError: true`), `test_sampling` (`sampling/createMessage`),
  `test_elicitation`, `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums`
  (`elicitation/create`), `json_schema_2020_12_tool` (a 2020-12 inputSchema with `$schema`,
  `$defs`, `additionalProperties: false`), `test_reconnection` (closes its SSE stream mid-call,
  SEP-1699);
- resources: `test://static-text`, `test://static-binary`, `test://watched-resource`, the
  template `test://template/{id}/data`; `resources/subscribe` and `resources/unsubscribe`;
- prompts: `test_simple_prompt`, `test_prompt_with_arguments`,
  `test_prompt_with_embedded_resource`, `test_prompt_with_image`;
- `logging/setLevel` (filters the tools' log messages per session) and `completion/complete`
  (minimal: values for `test_prompt_with_arguments`' arguments).

The suite speaks 2025-11-25, where sampling and elicitation are requests on the back-channel.
A client at 2026-07-28 (such as Quarry's hub, which negotiates with `server/discover`) has no
back-channel: there the sampling and elicitation tools answer with an `InputRequiredResult`
(SEP-2322) carrying the same request, and complete when the call is retried with the answer.

The 2026-07-28 SDK dropped `logging/setLevel` and `resources/(un)subscribe` from `MCPServer`'s
surface; they are registered on the low-level server, as the SDK's own conformance fixture does
(the suite speaks 2025-11-25, where they exist). An in-memory event store with a 100 ms retry
interval makes the POST SSE streams resumable (priming event, `retry:`, Last-Event-ID replay).
Bound to 127.0.0.1, the SDK's DNS-rebinding protection is on (foreign Host/Origin → 4xx).
"""

from __future__ import annotations

import base64
import json
import sys
import warnings
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    JSONRPCMessage,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

# logging, sampling and the `Context.info` helpers are deprecated at 2026-07-28; the suite
# exercises them at 2025-11-25, where they are current.
warnings.filterwarnings("ignore", category=DeprecationWarning)
try:
    from mcp.shared.exceptions import MCPDeprecationWarning

    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
except ImportError:  # pragma: no cover
    pass

# A 1x1 red PNG and a one-sample (silent) 8 kHz mono WAV file.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_SILENCE = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA=="

LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


# ---------------------------------------------------------------------------------------------
# SSE resumability (SEP-1699): every event on a stream is stored; a client that reconnects with
# Last-Event-ID gets the events after it.


class MemoryEventStore(EventStore):
    def __init__(self) -> None:
        self._events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self._events) + 1)
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        for s, e, message in self._events:
            if s == stream and int(e) > int(last_event_id) and message is not None:  # None: priming event
                await send_callback(EventMessage(message, e))
        return stream


# ---------------------------------------------------------------------------------------------
# Per-session state set by logging/setLevel and resources/subscribe.

_log_level: dict[str, str] = {}
_subscriptions: dict[str, set[str]] = {}


def _modern(ctx: Context) -> bool:
    """True at 2026-07-28, where a server has no back-channel for its own requests."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _session_key(request: Any) -> str:
    headers = getattr(request, "headers", None) or {}
    return headers.get("mcp-session-id") or ""


async def _log(ctx: Context, level: str, message: str) -> None:
    """A `notifications/message` on this call's stream, unless the session's level is higher."""
    floor = _log_level.get(_session_key(ctx.request_context.request), "debug")
    if LOG_LEVELS.index(level) >= LOG_LEVELS.index(floor):
        await ctx.log(level, message, logger_name="conformance-fixture")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Tools.


def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


def test_image_content() -> list[ImageContent]:
    """Returns an image (a 1x1 red PNG)."""
    return [ImageContent(type="image", data=PNG_1X1, mime_type="image/png")]


def test_audio_content() -> list[AudioContent]:
    """Returns audio (a one-sample silent WAV file)."""
    return [AudioContent(type="audio", data=WAV_SILENCE, mime_type="audio/wav")]


def test_embedded_resource() -> list[EmbeddedResource]:
    """Returns an embedded text resource."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
            ),
        )
    ]


def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            ),
        ),
    ]


async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages about 50 ms apart while it runs."""
    await _log(ctx, "info", "Tool execution started")
    await anyio.sleep(0.05)
    await _log(ctx, "info", "Tool processing data")
    await anyio.sleep(0.05)
    await _log(ctx, "info", "Tool execution completed")
    return "Tool with logging executed successfully"


async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 (about 50 ms apart) when the call has a progress token."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(0.05)
        await ctx.report_progress(progress=progress, total=100, message=f"Completed step {progress} of 100")
    return "Tool with progress executed successfully"


def test_error_handling() -> str:
    """Always fails: the result has isError true."""
    # ToolError: its message reaches the client (any other exception is reported without it).
    raise ToolError("This tool intentionally returns an error for testing")


async def test_sampling(prompt: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model (sampling/createMessage) and returns its answer."""
    if _modern(ctx):
        responses = ctx.input_responses or {}
        answer = responses.get("sampling")
        if isinstance(answer, CreateMessageResult):
            return f"LLM response: {_sampled_text(answer)}"
        return InputRequiredResult(
            input_requests={
                "sampling": CreateMessageRequest(
                    params=CreateMessageRequestParams(
                        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                        max_tokens=100,
                    )
                )
            }
        )
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    return f"LLM response: {_sampled_text(result)}"


def _sampled_text(result: CreateMessageResult) -> str:
    return result.content.text if result.content.type == "text" else f"<{result.content.type}>"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> ElicitResult | InputRequiredResult:
    """Asks the user: `elicitation/create` on the back-channel (2025-11-25), or, at 2026-07-28
    (no back-channel), an InputRequiredResult the client answers by retrying the call.

    The raw schema form: SEP-1330's titled enums (oneOf, enumNames, items.anyOf) are not
    expressible through `Context.elicit`'s primitive-only Pydantic schemas."""
    if _modern(ctx):
        answer = (ctx.input_responses or {}).get("elicitation")
        if isinstance(answer, ElicitResult):
            return answer
        return InputRequiredResult(
            input_requests={
                "elicitation": ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
            }
        )
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


async def test_elicitation(message: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the user (elicitation/create) for a username and an email address."""
    result = await _elicit(
        ctx,
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    if isinstance(result, InputRequiredResult):
        return result
    return f"User response: action={result.action}, content={json.dumps(result.content or {})}"


async def test_elicitation_sep1034_defaults(ctx: Context) -> str | InputRequiredResult:
    """Elicitation whose schema has a default for every primitive type (SEP-1034)."""
    result = await _elicit(
        ctx,
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        },
    )
    if isinstance(result, InputRequiredResult):
        return result
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content or {})}"


async def test_elicitation_sep1330_enums(ctx: Context) -> str | InputRequiredResult:
    """Elicitation with the five enum schema variants of SEP-1330."""
    result = await _elicit(
        ctx,
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Untitled single-select",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Titled single-select",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy titled enum",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Untitled multi-select",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Titled multi-select",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            "required": [],
        },
    )
    if isinstance(result, InputRequiredResult):
        return result
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content or {})}"


async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call; the result arrives after the client reconnects (SEP-1699)."""
    await _log(ctx, "info", "Before disconnect")
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    await _log(ctx, "info", "After reconnect")
    return "Reconnection test completed"


def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"name={name!r}, address={json.dumps(address)}"


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def _tools() -> list[Tool]:
    tools = [
        Tool.from_function(fn)
        for fn in (
            test_simple_text,
            test_image_content,
            test_audio_content,
            test_embedded_resource,
            test_multiple_content_types,
            test_tool_with_logging,
            test_tool_with_progress,
            test_error_handling,
            test_sampling,
            test_elicitation,
            test_elicitation_sep1034_defaults,
            test_elicitation_sep1330_enums,
            test_reconnection,
        )
    ]
    # MCPServer derives a tool's inputSchema from the function's signature; the 2020-12 keywords
    # ($schema, $defs, $ref) are set on the registration instead (arguments are still validated
    # against the signature).
    schema_tool = Tool.from_function(json_schema_2020_12_tool)
    schema_tool.parameters = JSON_SCHEMA_2020_12
    return [*tools, schema_tool]


app = MCPServer("mcp-conformance-fixture", version="0.1.0", tools=_tools())


# ---------------------------------------------------------------------------------------------
# Resources.


@app.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return base64.b64decode(PNG_1X1)


@app.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@app.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template: the id is substituted into the content."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# ---------------------------------------------------------------------------------------------
# Prompts.


@app.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A simple prompt without arguments."""
    return [UserMessage(content=TextContent(type="text", text="This is a simple prompt for testing."))]


@app.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(content=TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@app.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds the resource named by resourceUri."""
    return [
        UserMessage(
            content=EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
                ),
            )
        ),
        UserMessage(content=TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@app.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [
        UserMessage(content=ImageContent(type="image", data=PNG_1X1, mime_type="image/png")),
        UserMessage(content=TextContent(type="text", text="Please analyze the image above.")),
    ]


# ---------------------------------------------------------------------------------------------
# Completion, logging level and resource subscriptions.

# Candidates for test_prompt_with_arguments' arguments (the suite completes arg1 from "test").
_COMPLETIONS = {"arg1": ["paris", "park", "party", "testValue1"], "arg2": ["testValue2", "world", "wonder"]}


@app.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: CompletionContext | None
) -> Completion:
    if isinstance(ref, PromptReference) and ref.name == "test_prompt_with_arguments":
        values = [v for v in _COMPLETIONS.get(argument.name, []) if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return Completion(values=[], total=0, has_more=False)


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    _log_level[_session_key(ctx.request)] = params.level
    return EmptyResult()


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    _subscriptions.setdefault(_session_key(ctx.request), set()).add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    _subscriptions.get(_session_key(ctx.request), set()).discard(str(params.uri))
    return EmptyResult()


_lowlevel = app._lowlevel_server  # no public API for these 2025-11-25 methods in MCPServer 2.x
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1])
    asgi = app.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100, host="127.0.0.1")
    config = uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
