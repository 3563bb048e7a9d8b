"""The Static Files settings, declared once: URL prefixes served from folders
by the server itself, before the app, on every worker class.

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from supervise.validators import BOOL, OPT_STR, Check, Invalid

_PREFIX = re.compile(r"(/[A-Za-z0-9._~!$&'()*+,;:@-]+)+")


def _static_map(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise Invalid(f"{value!r} is not a list of PREFIX=DIR")
    out = []
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise Invalid(f"{item!r}: write PREFIX=DIR, for example /static=./static")
        prefix, _, folder = item.partition("=")
        prefix = prefix.strip().rstrip("/")
        if not _PREFIX.fullmatch(prefix):
            raise Invalid(
                f"{item!r}: the prefix is a URL path such as /static (letters, digits "
                "and -._~ in its segments; no query, no %-escapes)"
            )
        if not folder.strip():
            raise Invalid(f"{item!r}: no folder after '='")
        out.append(f"{prefix}={folder.strip()}")
    return out


STATIC_MAP = Check("list of str", _static_map)


def declare(add: Callable[..., None]) -> None:
    """The Static Files section."""
    add(
        name="static_map",
        native=True,
        flags=["--static-map"],
        metavar="PREFIX=DIR",
        action="append",
        validator=STATIC_MAP,
        default=[],
        help="Serve the files of folder DIR under the URL prefix PREFIX, before the app, "
        "on every worker class (repeat it for several; the longest prefix wins). DIR is "
        "relative to `--chdir`; a folder that is not there is an error at start. On "
        "`-k rsgi` and `-k native` the Rust server answers them itself (with sendfile(2) "
        "on plain HTTP/1.1, for every app interface); the Python workers send them with "
        "`os.sendfile`. Each response has "
        "Content-Type from the extension, Content-Length, ETag and Last-Modified; "
        "If-None-Match and If-Modified-Since give 304, one Range gives 206 (416 past "
        "the end), HEAD is answered, other methods get 405. A precompressed sibling "
        "(`FILE.br`, `.zst`, `.gz`) is sent when Accept-Encoding takes it, with `Vary: "
        "Accept-Encoding`. Never served: paths with `..` (also encoded), backslashes or "
        "NUL, dotfiles and dot-folders, folders (not listed), symlinks leading out of DIR "
        "(see `--static-follow-symlinks`). A missing file is 404 (see "
        "`--static-fallthrough`). Files are looked up on every request, so a changed "
        "file is served as it is now.",
    )
    add(
        name="static_cache_control",
        native=True,
        flags=["--static-cache-control"],
        metavar="VALUE",
        validator=OPT_STR,
        default=None,
        help="The Cache-Control field of every static file response, for example "
        "`public, max-age=3600`; none by default (browsers then revalidate with the "
        "ETag).",
    )
    add(
        name="static_immutable",
        native=True,
        flags=["--static-immutable"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Static files whose name carries a content hash (a part of 8 or more hex "
        "digits, with a digit among them, before the extension: `app.3f2a9c1b.js`, "
        "`app-3f2a9c1b8d0e.css`, as Django's ManifestStaticFilesStorage and most bundlers "
        "name them) get `Cache-Control: public, max-age=31536000, immutable`: a new "
        "version has a new name, so browsers may keep these for good.",
    )
    add(
        name="static_fallthrough",
        native=True,
        flags=["--static-fallthrough"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="A path under a static prefix with no file (or a folder) goes to the app "
        "instead of a 404. Paths that try to leave the folder are 404 regardless.",
    )
    add(
        name="static_follow_symlinks",
        native=True,
        flags=["--static-follow-symlinks"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Serve symlinks whose target lies outside the static folder (off: 404, so "
        "that a link planted in an upload folder cannot expose other files).",
    )
