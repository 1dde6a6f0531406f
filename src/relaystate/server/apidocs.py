"""The API's own documentation pages, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, drawn
from assets this server ships (fastapi-offline's copies), so they work with no internet.

Each page is sent with a Content-Security-Policy that lets the browser load nothing from any
other host: ReDoc's bundle still names a logo on Redocly's CDN, and a page that works offline
should not ask the internet when it is online either.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
ONLY_HERE = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:"
)
"""The docs pages' CSP: their own scripts (and the inline start-up script), nothing else."""


def install(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets; call on an app made with
    ``docs_url=None, redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    title = app.title

    def sealed(page: HTMLResponse) -> HTMLResponse:
        page.headers["Content-Security-Policy"] = ONLY_HERE
        return page

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return sealed(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{title} - Swagger UI",
                swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
                swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            )
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return sealed(
            get_redoc_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{title} - ReDoc",
                redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
                with_google_fonts=False,
            )
        )
