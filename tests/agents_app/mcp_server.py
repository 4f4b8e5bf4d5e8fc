"""A real MCP server for tests (streamable HTTP on loopback): `python mcp_server.py PORT TOKEN`.

Its one tool, `weather`, answers only when the request carries the remote's secret header.
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context

port, token = int(sys.argv[1]), sys.argv[2]
server = MCPServer("test-remote")


@server.tool()
def weather(city: str, ctx: Context) -> str:
    """The weather in a city."""
    if (ctx.headers or {}).get("x-remote-token") != token:
        return "unauthorised"
    return f"Sunny in {city}, 21°C"


server.run(transport="streamable-http", host="127.0.0.1", port=port)
