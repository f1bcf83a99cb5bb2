"""`levelflow serve` under concurrency (issue 33 items 2 and 7).

Epochs take turns in arrival order; at most `max_queued` wait and a further one gets 503 with
Retry-After; 50 clients at once get no connection reset and every accepted epoch is applied
exactly once (the final relations equal a from-scratch evaluation of the facts they left). An
epoch queued behind a program change is checked against the program current when it runs.
The tests hold the service's lock to fill the queue deterministically.
"""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest
from test_incremental_properties import FAMILIES, check_against_reference
from test_serve import HttpView, Served, bootstrap

from levelflow.engine.incremental import StateDir
from levelflow.serve_service import EpochQueue, RequestError
from levelflow.tasks import build_tasks, parse_program

CLIENTS, MAX_QUEUED = 50, 20


def wait_until(check, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_turns_follow_arrival_and_a_full_queue_refuses():
    lock = threading.Lock()
    queue, order = EpochQueue(lock, 3), []

    def take(k):
        with queue.turn():
            order.append(k)

    with lock:  # ticket 0 waits for the lock; tickets 1..3 wait for their turn
        threads = []
        for k in range(4):
            threads.append(threading.Thread(target=take, args=(k,)))
            threads[-1].start()
            wait_until(lambda k=k: queue._next == k + 1)
        assert queue.waiting == 3
        with pytest.raises(RequestError) as e, queue.turn():
            pass
        assert e.value.status == 503 and e.value.headers == {"Retry-After": "1"}
    for t in threads:
        t.join()
    assert order == [0, 1, 2, 3] and queue.waiting == 0


def post(port: int, path: str, body: str) -> tuple[int, str | None, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", path, body)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Retry-After"), resp.read().decode()
    finally:
        conn.close()


def in_thread(results: dict, key, *args) -> threading.Thread:
    def call():
        try:
            results[key] = post(*args)
        except Exception as e:  # noqa: BLE001 - a reset is what the test looks for
            results[key] = e

    t = threading.Thread(target=call)
    t.start()
    return t


NODE = ".decl node(x:number)\n.input node\n.decl seen(x:number)\nseen(x) :- node(x).\n"


@pytest.mark.parametrize("family,new_text,body,status,after", [
    # parent's symbols become numbers: parent is rebuilt (empty), then takes the epoch's facts
    ("sg", FAMILIES["sg"][0].replace("symbol", "number"), "+parent(1, 3)\n+parent(2, 3)\n",
     200, {"parent": {(1, 3), (2, 3)}}),
    ("tc", NODE, "+edge(7, 8)\n", 409, {"node": set()}),  # edge dropped
])
def test_an_epoch_queued_behind_a_program_change_meets_the_new_program(
        spark, tmp_path, family, new_text, body, status, after):
    state, *_ = bootstrap(spark, tmp_path, family, 51)
    served = Served(spark, state)
    svc, results, before = served.service, {}, StateDir(state).current()
    try:
        with svc.lock:
            threads = [in_thread(results, "program", served.port, "/program", new_text)]
            wait_until(lambda: svc.queue._next == 1)  # the change holds the first ticket
            threads.append(in_thread(results, "epoch", served.port, "/epoch", body))
            wait_until(lambda: svc.queued == 1)
        for t in threads:
            t.join()
        assert results["program"][0] == 200, results
        got, _, text = results["epoch"]
        assert got == status, text
        if status == 409:
            assert text == ("request:1: error: unknown relation edge (the program changed "
                            "while this epoch waited; nothing applied)\n")
            assert StateDir(state).current() == before + 1  # the change only
        else:
            assert json.loads(text)["epoch"] == before + 2
        new_pt = build_tasks(parse_program(new_text, "new.dl"))
        check_against_reference(HttpView(served, spark), new_pt, after, tmp_path / "ref")
    finally:
        served.close()


def test_fifty_clients_no_reset_each_accepted_epoch_applied_once(spark, tmp_path):
    state, pt, facts, _, _ = bootstrap(spark, tmp_path, "tc", 52)
    served = Served(spark, state, max_queued=MAX_QUEUED)
    svc, results, before = served.service, {}, StateDir(state).current()
    edges = {i: (1000 + i, 2000 + i) for i in range(CLIENTS)}
    try:
        with svc.lock:  # one epoch holds its turn, MAX_QUEUED wait, the rest are refused
            threads = [in_thread(results, i, served.port, "/epoch", f"+edge{edges[i]}\n")
                       for i in range(CLIENTS)]
            wait_until(lambda: len(results) == CLIENTS - MAX_QUEUED - 1)
            assert svc.queued == MAX_QUEUED
        for t in threads:
            t.join()
        errors = {i: r for i, r in results.items() if isinstance(r, Exception)}
        assert not errors  # no ConnectionResetError, nothing lost
        accepted = {i for i, r in results.items() if r[0] == 200}
        for i, (status, retry, text) in results.items():
            assert i in accepted or (status, retry) == (503, "1") and \
                text.endswith(f"epochs are already waiting (at most {MAX_QUEUED}); retry "
                              f"later\n"), results[i]
        assert len(accepted) == MAX_QUEUED + 1
        epochs = sorted(json.loads(results[i][2])["epoch"] for i in accepted)
        assert epochs == list(range(before + 1, before + len(accepted) + 1))
        assert StateDir(state).current() == epochs[-1]
        facts["edge"] |= {edges[i] for i in accepted}
        check_against_reference(HttpView(served, spark), pt, facts, tmp_path / "ref")
    finally:
        served.close()
