from django.db import models


class Note(models.Model):
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "body": self.body}
