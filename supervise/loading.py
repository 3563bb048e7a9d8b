"""Turn an application reference ("pkg.mod:attr") into the callable to serve.

Accepted forms, as in Gunicorn: ``module`` (attribute ``application``, then
``app``), ``module:name``, ``module:obj.attr``, and factory calls with literal
arguments ``module:create_app('prod', debug=False)``. A factory named with
``--factory``-style brackets is called once per worker (or once in the master
with --preload).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import sys
import traceback
from typing import Any


class AppLoadError(Exception):
    """The app could not be loaded; str() is the message for the user."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details  # a traceback, when the app's own code raised


def prepare_import_path(chdir: str | None, pythonpath: str | None) -> None:
    """Make the app importable the way the user expects from its directory."""
    if chdir:
        os.chdir(chdir)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    if pythonpath:
        for path in reversed([p.strip() for p in pythonpath.split(",") if p.strip()]):
            if path not in sys.path:
                sys.path.insert(0, path)


def _parse_factory(expr: str, uri: str) -> tuple[str, list[Any], dict[str, Any], bool]:
    """Split ``name`` or ``name(args)`` into the dotted name and literal args."""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise AppLoadError(f"Failed to parse {expr!r} in {uri!r} as an attribute name") from None
    if isinstance(node, ast.Call):
        try:
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except ValueError:
            raise AppLoadError(
                f"Factory arguments in {uri!r} must be Python literals (strings, numbers, ...)"
            ) from None
        target = node.func
        called = True
    else:
        args, kwargs, target, called = [], {}, node, False
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if not isinstance(target, ast.Name):
        raise AppLoadError(f"Failed to parse {expr!r} in {uri!r} as an attribute name")
    parts.append(target.id)
    return ".".join(reversed(parts)), args, kwargs, called


def import_app(uri: str) -> Any:
    """Import and return the object ``uri`` names, calling a factory if asked."""
    module_name, _, expr = uri.partition(":")
    if not module_name:
        raise AppLoadError(f"Invalid application reference {uri!r}: expected 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise AppLoadError(
                f"No module named {exc.name!r} (from {uri!r}); check the name, --chdir "
                f"and --pythonpath (sys.path[0] is {sys.path[0]!r})"
            ) from None
        raise AppLoadError(
            f"Failed to import {module_name!r}: {exc}", traceback.format_exc()
        ) from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise AppLoadError(
            f"Failed to import {module_name!r}: {type(exc).__name__}: {exc}",
            traceback.format_exc(),
        ) from None

    if not expr:
        for candidate in ("application", "app"):
            if hasattr(module, candidate):
                return getattr(module, candidate)
        raise AppLoadError(f"Module {module_name!r} has no 'application' or 'app' attribute")

    name, args, kwargs, called = _parse_factory(expr, uri)
    obj: Any = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppLoadError(f"Failed to find attribute {name!r} in {module_name!r}") from None
    if called:
        try:
            obj = obj(*args, **kwargs)
        except Exception as exc:
            raise AppLoadError(
                f"Application factory {expr!r} raised {type(exc).__name__}: {exc}",
                traceback.format_exc(),
            ) from None
    if obj is None:
        raise AppLoadError(f"{uri!r} is None; did the factory forget to return the app?")
    if not callable(obj) and not hasattr(obj, "__rsgi__"):
        raise AppLoadError(f"{uri!r} is not callable (a {type(obj).__name__})")
    return obj


def detect_interface(app: Any) -> str | None:
    """Guess which server interface an app implements: "wsgi", "asgi" or "rsgi"."""
    if hasattr(app, "__rsgi__"):
        return "rsgi"
    call = app if inspect.isroutine(app) else getattr(app, "__call__", None)  # noqa: B004
    if call is None:
        return None
    try:
        params = [
            p
            for p in inspect.signature(call).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = None
    if inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(app):
        # RSGI's callable is `async (scope, protocol)`; ASGI's takes three.
        return "rsgi" if params is not None and len(params) == 2 else "asgi"
    if params is None:
        return None
    if len(params) == 2:
        return "wsgi"
    if len(params) == 3:
        return "asgi"
    return None


def check_interface(app: Any, uri: str, interface: str, worker_class: str) -> None:
    """Refuse an app the worker class cannot serve, saying which -k fits."""
    found = detect_interface(app)
    if found is None or found == interface:
        return
    raise AppLoadError(
        f"{uri!r} is {'a' if found == 'wsgi' else 'an'} {found.upper()} application but "
        f"worker class {worker_class!r} "
        f"serves {interface.upper()}; {_worker_hint(found)}"
    )


def _worker_hint(interface: str) -> str:
    from supervise.workers import names_for

    fitting = names_for(interface)
    if not fitting:
        return f"this version of supervise has no {interface.upper()} worker class yet"
    if len(fitting) == 1:
        return f"use -k {fitting[0]}"
    return f"use -k {', '.join(fitting[:-1])} or {fitting[-1]}"


def load_app(cfg: Any) -> Any:
    """Load the app named by the configuration (used by workers and --check-config)."""
    uri = cfg.app_uri
    if not uri:
        raise AppLoadError("No application specified: supervise [OPTIONS] MODULE:APP")
    prepare_import_path(cfg.chdir, cfg.pythonpath)
    app = import_app(uri)
    if getattr(cfg, "factory", False):
        try:
            app = app()
        except Exception as exc:
            raise AppLoadError(
                f"Application factory {uri!r} raised {type(exc).__name__}: {exc}",
                traceback.format_exc(),
            ) from None
        if not callable(app):
            raise AppLoadError(f"Factory {uri!r} returned {type(app).__name__}, not an app")
    return app
