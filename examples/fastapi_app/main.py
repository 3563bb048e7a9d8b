"""A FastAPI app served by the asgi worker: JSON, streaming, files and a WebSocket.

cd examples/fastapi_app && supervise -k asgi -w 2 main:app
cd examples/fastapi_app && supervise -k native -w 2 main:app   # on the native engine
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, StreamingResponse

STATIC = Path(__file__).parent / "static"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict]:
    # What startup puts in the state reaches every request (request.state).
    yield {"greeting": "Hello from FastAPI"}


app = FastAPI(lifespan=lifespan)


@app.get("/")
async def index(request: Request) -> dict:
    return {"message": request.state.greeting, "scheme": request.url.scheme}


@app.get("/items/{item_id}")
async def item(item_id: int, q: str | None = None) -> dict:
    return {"item_id": item_id, "q": q}


@app.post("/echo")
async def echo(request: Request) -> dict:
    return {"json": await request.json()}


@app.get("/stream")
async def stream() -> StreamingResponse:
    async def lines() -> AsyncIterator[bytes]:
        for i in range(5):
            yield f"line {i}\n".encode()
            await asyncio.sleep(0.01)

    return StreamingResponse(lines(), media_type="text/plain")


@app.get("/files/{name}")
async def files(name: str) -> FileResponse:
    path = (STATIC / name).resolve()
    if path.parent != STATIC.resolve() or not path.is_file():
        raise HTTPException(status_code=404)
    return FileResponse(path)


@app.websocket("/ws")
async def websocket_echo(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            text = await websocket.receive_text()
            await websocket.send_text(f"echo: {text}")
    except WebSocketDisconnect:
        pass
