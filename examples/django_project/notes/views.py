"""A tiny JSON API over the sqlite database, and a streamed response."""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt

from notes.models import Note


def index(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"Hello from Django at {request.build_absolute_uri()}")


@csrf_exempt
def notes(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        data = json.loads(request.body)
        note = Note.objects.create(title=data["title"], body=data.get("body", ""))
        return JsonResponse(note.as_dict(), status=201)
    return JsonResponse({"notes": [n.as_dict() for n in Note.objects.order_by("id")]})


def note(request: HttpRequest, note_id: int) -> HttpResponse:
    return JsonResponse(get_object_or_404(Note, id=note_id).as_dict())


def stream(request: HttpRequest) -> StreamingHttpResponse:
    """Five lines, each sent as it is made: no Content-Length, so the body goes
    out chunked (HTTP/1.1) and a client sees each line as it comes.

    Over ASGI the lines come from an async generator: Django would read a
    plain generator to its end before sending anything, and warn.
    """

    def lines() -> Iterator[str]:
        for i in range(5):
            yield f"line {i}\n"
            time.sleep(0.01)

    async def lines_async() -> AsyncIterator[str]:
        for i in range(5):
            yield f"line {i}\n"
            await asyncio.sleep(0.01)

    content = lines_async() if isinstance(request, ASGIRequest) else lines()
    return StreamingHttpResponse(content, content_type="text/plain; charset=utf-8")
