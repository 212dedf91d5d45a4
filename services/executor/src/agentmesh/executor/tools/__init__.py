"""Tools an agent may call: function tools (the built-ins and any registered in the executor) and
the tools of MCP servers, behind one `Tool` interface and one `ToolSet` that validates arguments."""
