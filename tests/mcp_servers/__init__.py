"""MCP servers the tests start as processes of their own."""
