"""The Celery side of agentq's benchmark: the same chords, the same HTTP
call per task (one OpenAI-style chat completion to chaosllm), the same
Redis. Run by run.py; see bench/README.md."""
import os
import threading

import requests
from celery import Celery

REDIS = os.environ["BENCH_REDIS"]
CHAOS = os.environ["BENCH_CHAOS"]

app = Celery("bench", broker=REDIS, backend=REDIS)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)

_local = threading.local()


def chat(prompt):
    s = getattr(_local, "session", None)
    if s is None:
        s = _local.session = requests.Session()
    r = s.post(
        CHAOS + "/v1/chat/completions",
        json={"model": "bench-model", "messages": [{"role": "user", "content": prompt}]},
        headers={"Authorization": "Bearer bench-key"},
        timeout=10,
    )
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


@app.task
def member(prompt):
    return chat(prompt)


@app.task
def body(results):
    return chat("join " + results[0])
