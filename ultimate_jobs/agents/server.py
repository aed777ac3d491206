"""The MCP server of the operator tools (P9), on the official ``mcp`` SDK.

``serve_stdio(user)`` answers one agent over stdin/stdout (``manage.py jobs_mcp``);
``handle_http(...)`` answers one streamable-HTTP request (``views.mcp_endpoint``),
stateless, with JSON responses, so it fits a Django view. Both list the same tools and
run each call as the given Django user (``tools.call``), in a worker thread: the ORM
is synchronous, and the thread's connection is closed when the call ends.

``mcp`` is an optional extra (``pip install ultimate-jobs[mcp]``): it is imported when
a server is built, never when Django loads the app.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
from django.db import close_old_connections, connections

from ultimate_jobs.agents import tools
from ultimate_jobs.ground.exceptions import JobsError

if TYPE_CHECKING:
    from mcp.server import Server

NAME = "ultimate-jobs"
HTTP_TIMEOUT = 300.0  # seconds one HTTP request may take (a bulk verb moves 1,000 rows)
INSTRUCTIONS = (
    "Operate the background jobs of this Django project: find what failed "
    "(jobs_stats, jobs_list, jobs_show), then act on it (jobs_retry, jobs_cancel, "
    "jobs_bulk, ...). Every change is recorded with your user; a tool your user may "
    "not use answers a refusal and changes nothing."
)


def _run_sync(name: str, arguments: dict[str, Any] | None, user: Any) -> str:
    close_old_connections()
    try:
        answer = tools.call(name, arguments, user)
        return json.dumps(answer, indent=2, sort_keys=True, default=str)
    finally:
        connections.close_all()


def build_server(user: Any) -> Server[Any]:
    """An MCP server whose tools act as ``user``."""
    import mcp_types as types
    from mcp.server import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tools.input_schema(tool),
                )
                for tool in tools.TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        try:
            # abandon_on_cancel: a request past HTTP_TIMEOUT answers at once; the
            # call's thread ends on its own (its statements are each bounded).
            text = await anyio.to_thread.run_sync(
                _run_sync, params.name, params.arguments, user, abandon_on_cancel=True
            )
        except JobsError as exc:
            error = {"error": {"code": exc.code, "message": exc.message}}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(error))],
                is_error=True,
            )
        except tools.ToolRefusedError as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(exc))],
                is_error=True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=False
        )

    return Server(
        NAME,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(user: Any) -> None:
    """Answer one agent over stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(user)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(
                read_stream, write_stream, server.create_initialization_options()
            )

    anyio.run(main)


def handle_http(
    user: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One streamable-HTTP request, answered by a stateless server acting as ``user``:
    (status, headers, body). The caller authenticated the request (views)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    answer: dict[str, Any] = {"status": None, "headers": []}
    chunks: list[bytes] = []

    async def main() -> None:
        # Django's ALLOWED_HOSTS and the authentication in front guard the host and
        # the caller; the SDK's own DNS-rebinding check would refuse a proxied host.
        manager = StreamableHTTPSessionManager(
            app=build_server(user),
            stateless=True,
            json_response=True,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=False
            ),
        )
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")  # pragma: no cover

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = int(message["status"])
                answer["headers"] = list(message.get("headers", []))
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("localhost", 80),
        }
        # A bound on the request: nothing may hold a web worker for ever.
        with anyio.move_on_after(HTTP_TIMEOUT):
            async with manager.run():
                await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]

    anyio.run(main)
    if answer["status"] is None:
        timeout = {"error": {"code": "X_TIMEOUT", "message": "no answer in time"}}
        return (
            504,
            [(b"content-type", b"application/json")],
            json.dumps(timeout).encode(),
        )
    return answer["status"], answer["headers"], b"".join(chunks)
