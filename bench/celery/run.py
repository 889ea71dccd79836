"""Runs the Celery chords benchmark and prints one JSON line:
{"chords": N, "members": M, "seconds": S, "chords_per_sec": C, "steps_per_sec": X}.

Environment: BENCH_REDIS (redis://host:port/db), BENCH_CHAOS (chaosllm's
base URL), BENCH_CHORDS, BENCH_MEMBERS, BENCH_CONCURRENCY, BENCH_POOL
(threads unless set; prefork forks BENCH_CONCURRENCY processes)."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from celery import chord  # noqa: E402

from app import app, body, member  # noqa: E402

chords = int(os.environ.get("BENCH_CHORDS", "200"))
members = int(os.environ.get("BENCH_MEMBERS", "10"))
concurrency = os.environ.get("BENCH_CONCURRENCY", "50")
pool = os.environ.get("BENCH_POOL", "threads")

worker = subprocess.Popen(
    [sys.executable, "-m", "celery", "-A", "app", "worker", "-P", pool, "-c", concurrency,
     "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
    cwd=os.path.dirname(os.path.abspath(__file__)),
)
try:
    deadline = time.time() + 60
    while not app.control.ping(timeout=0.5):
        if worker.poll() is not None or time.time() > deadline:
            sys.exit("celery worker did not start")
    start = time.time()
    results = [
        chord([member.s("member %d of %d" % (i, n)) for i in range(members)])(body.s())
        for n in range(chords)
    ]
    for r in results:
        r.get(timeout=600, disable_sync_subtasks=False)
    secs = time.time() - start
    print(json.dumps({
        "chords": chords, "members": members, "pool": pool, "concurrency": int(concurrency),
        "seconds": secs, "chords_per_sec": chords / secs, "steps_per_sec": chords * (members + 1) / secs,
    }))
finally:
    worker.terminate()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
