"""The MCP client: servers' tools offered as `mcp_<server>_<tool>`, through one process-wide
hub whose connections live on a thread of their own. Plain Python: the SDK is imported when
the first server connects, not with this package."""

from __future__ import annotations

from agent.tools.mcp.config import McpServerConfig
from agent.tools.mcp.hub import McpHub, mcp_hub
from agent.tools.mcp.tool import McpTool

__all__ = ["McpHub", "McpServerConfig", "McpTool", "mcp_hub"]
