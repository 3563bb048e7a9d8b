"""A tiny JSON API over the sqlite database."""

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
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
