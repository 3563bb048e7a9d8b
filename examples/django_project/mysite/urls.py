from django.urls import path
from notes import views

urlpatterns = [
    path("", views.index),
    path("notes/", views.notes),
    path("notes/<int:note_id>/", views.note),
    path("stream/", views.stream),
]
