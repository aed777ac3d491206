"""The app's URLs: the MCP endpoint for remote agents (P9, docs/agents.md).

::

    path("jobs/", include("ultimate_jobs.urls")),   # POST /jobs/mcp
"""

from __future__ import annotations

from django.urls import path

from ultimate_jobs.agents.http import mcp_endpoint

app_name = "ultimate_jobs"
urlpatterns = [path("mcp", mcp_endpoint, name="mcp")]
