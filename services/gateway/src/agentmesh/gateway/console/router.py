"""Serves the console: its page at `/` and its assets at `/console/{asset}`, from the files in
`static/` beside this module. Both are public: the page holds no data, and everything it shows it
fetches from the REST API with the token of whoever signs in."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from agentmesh.runtime.errors import NotFound

ASSET_PREFIX = "/console"

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

# The page may load only what the gateway itself serves: no CDN, so it works offline, and nothing
# injected into an event's content can pull in a script or send the token elsewhere.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Assets change with the package: revalidate (FileResponse sends an ETag) rather than cache.
    "Cache-Control": "no-cache",
}


def _static_dir() -> Path:
    return Path(str(resources.files(__package__) / "static"))


def console_router() -> APIRouter:
    """The console's two routes. The assets are the flat set of files in `static/`, listed once
    here, so an asset name is a key, never a path the request could walk out of."""
    static = _static_dir()
    assets = {path.name: path for path in static.iterdir() if path.suffix in _MEDIA_TYPES}
    router = APIRouter(tags=["console"], include_in_schema=False)

    @router.get("/")
    async def console_page() -> FileResponse:
        """The console's single page."""
        return FileResponse(static / "index.html", media_type=_MEDIA_TYPES[".html"], headers=_PAGE_HEADERS)

    @router.get(ASSET_PREFIX + "/{asset}")
    async def console_asset(asset: str) -> FileResponse:
        """One of the console's scripts, stylesheets or images."""
        path = assets.get(asset)
        if path is None or path.name == "index.html":
            raise NotFound(f"console asset {asset!r} not found")
        return FileResponse(path, media_type=_MEDIA_TYPES[path.suffix], headers=_PAGE_HEADERS)

    return router
