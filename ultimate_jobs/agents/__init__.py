"""Agent tools (P9): the operator verbs as MCP tools, over stdio and HTTP.

``tools`` names the tools, builds their schemas from ``manage.py jobs``'s options and
runs one call as a Django user; ``server`` serves them on the ``mcp`` SDK; ``http`` is
the Django view of the HTTP transport and ``tokens`` its bearer tokens.
"""
