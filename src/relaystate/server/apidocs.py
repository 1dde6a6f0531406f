"""The API's own documentation pages, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, drawn
from assets this server ships (fastapi-offline's copies), so they work with no internet.

The pages are our own markup, not FastAPI's: those start Swagger UI with an inline script,
which a strict Content-Security-Policy forbids. Here every script is a file of this server
(Swagger UI's start is ``/docs/start.js``), and each page's policy (``headers.PAGE_POLICY``
with what the page needs besides) lets the browser load nothing from another host and
frame the page nowhere:

- Swagger UI: its stylesheet draws icons as ``data:`` images.
- ReDoc: its styled-components write ``<style>`` elements as it renders, so ``style-src``
  allows inline styles on this page only (scripts stay ``'self'`` alone: a nonce would not
  cover the stylesheet its bundle writes as it loads, and hashes would pin its bytes); its
  search runs in a ``blob:`` worker. Its bundle names a logo on Redocly's CDN: refused, as a
  page that works offline should not ask the internet when it is online either.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse, Response

from .headers import PAGE_POLICY

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
SWAGGER_POLICY = PAGE_POLICY.replace("img-src 'self'", "img-src 'self' data:")
REDOC_POLICY = (
    SWAGGER_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
    + "; worker-src blob:"
)

SWAGGER_START = """\
// Swagger UI's start, a file of its own: the page's policy runs no inline script.
"use strict";
window.ui = SwaggerUIBundle({
  url: document.getElementById("swagger-ui").dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""

_SWAGGER = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - Swagger UI</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi}"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{start}"></script>
</body>
</html>
"""

_REDOC = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - ReDoc</title>
<link rel="icon" href="{assets}/favicon.png">
</head>
<body>
<noscript>ReDoc needs JavaScript to show the documentation.</noscript>
<redoc spec-url="{openapi}"></redoc>
<script src="{assets}/redoc.standalone.js"></script>
</body>
</html>
"""


def install(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets; call on an app made with
    ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    def page(request: Request, markup: str, policy: str) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        html = markup.format(
            title=escape(app.title),
            assets=escape(f"{root}{ASSETS_URL}"),
            openapi=escape(f"{root}{app.openapi_url}"),
            start=escape(f"{root}/docs/start.js"),
        )
        return HTMLResponse(html, headers={"Content-Security-Policy": policy})

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        return page(request, _SWAGGER, SWAGGER_POLICY)

    @app.get("/docs/start.js", include_in_schema=False)
    def swagger_start() -> Response:
        return Response(SWAGGER_START, media_type="text/javascript")

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        return page(request, _REDOC, REDOC_POLICY)
