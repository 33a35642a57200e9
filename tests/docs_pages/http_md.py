# Generated from docs/http.md by tests/docs_blocks.py: edit the page, then run
# `python tests/docs_blocks.py`. tests/test_docs.py runs it and checks it is current.

# docs/http.md:20

from fastapi import FastAPI, Request
import redis
from fencing import RedisMark
from fencing.http import FenceMiddleware

r = redis.Redis()
app = FastAPI()


@app.put("/items/{key}")
def put_item(key: str, request: Request) -> dict[str, int]:
    token = request.state.fence_token  # the checked token, for the handler's own use
    ...
    return {"token": token}


def marks(key: str) -> RedisMark:
    return RedisMark(r, f"mark:{key}")  # each resource's high-water mark, in Redis


app.add_middleware(
    FenceMiddleware,
    resource=lambda method, path: path if method in ("PUT", "DELETE") else None,
    marks=marks,
)

# docs/http.md:73

from fastapi import Depends
from fencing.http import fastapi as fenced

fenced.install(app)  # answers refusals with their problem bodies
item_token = fenced.fence_token(lambda request: f"item:{request.path_params['key']}", marks)


@app.put("/v2/items/{key}")
async def put_item_v2(key: str, token: int = Depends(item_token)) -> dict[str, int]:
    return {"token": token}
