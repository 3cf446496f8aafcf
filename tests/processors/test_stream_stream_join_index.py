"""The stream-stream join emits what its first, plain algorithm emitted (kept below as the
reference: it sorts and scans the stores for every record). Over random inputs (keys of mixed
types, duplicates, out-of-order and late records, null keys and values, asymmetric windows,
grace), record by record, in batch mode and on working copies that move between workers (in
memory and in RocksDB, with replayed batches), it emits the same records in the same order and
leaves the same store contents."""

from __future__ import annotations

import gc
import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from streamtable import JoinWindows, StreamJoined, StreamsBuilder, TopologyTestDriver
from streamtable.config import StreamsConfig
from streamtable.dsl import joins as dsl_joins
from streamtable.engine.batch import run_task_batch
from streamtable.engine.wiring import wire
from streamtable.processors import stream_join
from streamtable.processors._operator import Operator
from streamtable.processors.api import Record
from streamtable.processors.stream_join import _Times
from streamtable.records import RawRecord
from streamtable.state import persistence as persistence_module
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.state.stores import EXPIRED_UP_TO, InMemoryKeyValueStore, expired_by, key_order

META, NO_TIME, MAX_TIME = stream_join.META, stream_join.NO_TIME, stream_join.MAX_TIME


# -- the reference: processors/stream_join.py as of commit 6abbb49 ------------------------


class OldJoinWindowStore:
    def __init__(self, store: Any, retention: int) -> None:
        self.store = store
        self.retention = retention
        self.segment = max(retention // 2, 60_000)

    def _meta(self) -> tuple[int, int, int]:
        stored = self.store.get(META)
        return (NO_TIME, NO_TIME, 0) if stored is None else stored[0]

    def observed_time(self) -> int:
        return self._meta()[0]

    def put(self, key: Any, value: Any, timestamp: int) -> bool:
        # one change since 6abbb49: a record's seq is the store's next (kept in META), not the
        # next of its key and timestamp
        observed, next_cleanup, seq = self._meta()
        observed = max(observed, timestamp)
        expired_up_to = observed - self.retention
        if next_cleanup == NO_TIME or expired_up_to >= next_cleanup:
            doomed = [k for k, _ in self.store.items() if k != META and k[1] <= expired_up_to]
            for k in doomed:
                self.store.delete(k)
            next_cleanup = expired_up_to + self.segment
        if timestamp <= expired_up_to:
            self.store.put(META, ((observed, next_cleanup, seq), observed))
            return False
        self.store.put(META, ((observed, next_cleanup, seq + 1), observed))
        assert all(k[2] < seq for k in self.store.keys_with_first(key))
        self.store.put((key, timestamp, seq), (value, timestamp))
        return True

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        low = max(time_from, self.observed_time() - self.retention + 1)
        return [(k[1], self.store.get(k)[0]) for k in self.store.keys_with_first(key)
                if low <= k[1] <= time_to]


class OldStreamJoinWindow(Operator):
    def __init__(self, store_name: str, windows: JoinWindows) -> None:
        self.store_name = store_name
        self.windows = windows

    def init(self, context: Any) -> None:
        super().init(context)
        self.window = OldJoinWindowStore(context.get_state_store(self.store_name),
                                         self.windows.retention)

    def process(self, record: Record) -> None:
        self.forward(record)
        if record.key is None or record.value is None:
            return
        if not self.window.put(record.key, record.value, record.timestamp):
            self.context.record_dropped(self.name, "record older than the join window's "
                                                   "retention (late)")


class OldStreamStreamJoin(Operator):
    def __init__(self, left_side: bool, other_store: str, outer_store: str | None,
                 windows: JoinWindows, joiner: Callable[[Any, Any], Any], outer: bool) -> None:
        self.left_side = left_side
        self.other_store = other_store
        self.outer_store = outer_store
        self.windows = windows
        self.joiner = joiner
        self.outer = outer
        if left_side:
            self.join_before, self.join_after = windows.before_ms, windows.after_ms
        else:
            self.join_before, self.join_after = windows.after_ms, windows.before_ms

    def init(self, context: Any) -> None:
        super().init(context)
        self.other = OldJoinWindowStore(context.get_state_store(self.other_store),
                                        self.windows.retention)
        self.held = (None if self.outer_store is None
                     else context.get_state_store(self.outer_store))

    def _join(self, mine: Any, theirs: Any) -> Any:
        return self.joiner(mine, theirs) if self.left_side else self.joiner(theirs, mine)

    def _tracker(self) -> tuple[int, int]:
        stored = self.held.get(META) if self.held is not None else None
        return (NO_TIME, MAX_TIME) if stored is None else stored[0]

    def _set_tracker(self, stream_time: int, min_time: int) -> None:
        if self.held is not None:
            self.held.put(META, ((stream_time, min_time), stream_time))

    def process(self, record: Record) -> None:
        ts = record.timestamp
        stream_time, min_time = self._tracker()
        if ts > stream_time:
            stream_time = ts
            self._set_tracker(stream_time, min_time)
        if self.outer and record.key is None and record.value is not None:
            self.forward(record.with_value(self._join(record.value, None)))
            return
        if record.key is None or record.value is None:
            self.context.record_dropped(self.name, "null key or value in a stream-stream join")
            return
        if self.held is not None and ts == stream_time:
            self._emit_closed(record, stream_time)
        time_from = max(0, ts - self.join_before)
        time_to = max(0, ts + self.join_after)
        partners = self.other.fetch(record.key, time_from, time_to)
        for other_ts, other_value in partners:
            if self.held is not None:
                partner = (other_ts, not self.left_side, record.key)
                if self.held.get(partner) is not None:
                    self.held.delete(partner)
            self.forward(Record(record.key, self._join(record.value, other_value),
                                max(ts, other_ts), record.headers))
        if partners or not self.outer:
            return
        stream_time, min_time = self._tracker()
        if self.held is None or time_to < stream_time:
            self.forward(record.with_value(self._join(record.value, None)))
            return
        self._set_tracker(stream_time, min(min_time, ts))
        hkey = (ts, self.left_side, record.key)
        stored = self.held.get(hkey)
        values = [] if stored is None else list(stored[0])
        values.append(record.value)
        self.held.put(hkey, (values, ts))

    def _emit_closed(self, record: Record, stream_time: int) -> None:
        _, min_time = self._tracker()
        grace = self.windows.grace_ms
        if min_time == MAX_TIME or min_time + self.join_after + grace >= stream_time:
            return
        min_time = MAX_TIME
        left_open = right_open = False
        entries = sorted(((k, v) for k, v in self.held.items() if k != META),
                         key=lambda kv: (kv[0][0], kv[0][1], key_order(kv[0][2])))
        for hkey, (values, _) in entries:
            held_ts, is_left, key = hkey
            min_time = held_ts
            if left_open and right_open:
                break
            lookback = self.windows.after_ms if is_left else self.windows.before_ms
            if held_ts + lookback + grace >= stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            for v in values:
                joined = self.joiner(v, None) if is_left else self.joiner(None, v)
                self.forward(Record(key, joined, held_ts, record.headers))
            self.held.delete(hkey)
        self._set_tracker(stream_time, min_time)


@pytest.fixture
def old_join(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """``with old_join():`` builds and runs joins with the reference operators (the DSL's
    node factories look the operator classes up when a task is built)."""

    @contextmanager
    def use() -> Iterator[None]:
        with monkeypatch.context() as m:
            m.setattr(dsl_joins, "StreamJoinWindow", OldStreamJoinWindow)
            m.setattr(dsl_joins, "StreamStreamJoin", OldStreamStreamJoin)
            yield

    return use


# -- random inputs ------------------------------------------------------------------------

STORES = {
    "inner": ["j-this-join-store", "j-other-join-store"],
    "left": ["j-this-join-store", "j-outer-other-join-store", "j-left-shared-join-store"],
    "outer": ["j-outer-this-join-store", "j-outer-other-join-store",
              "j-outer-shared-join-store"],
}


def tostring(a: Any, b: Any) -> str:
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def build(mode: str, windows: JoinWindows) -> Any:
    b = StreamsBuilder()
    s1, s2 = b.stream("topic1"), b.stream("topic2")
    join = {"inner": s1.join, "left": s1.left_join, "outer": s1.outer_join}[mode]
    join(s2, tostring, windows, stream_joined=StreamJoined.with_store_name("j")).to("out")
    return b.build()


def random_windows(rng: random.Random) -> JoinWindows:
    windows = JoinWindows.of_time_difference_and_grace(
        rng.choice([0, 1_000, 10_000, 25_000]), rng.choice([0, 0, 5_000, 20_000]))
    shape = rng.random()
    if shape < 0.2:
        windows = windows.before(rng.choice([0, 3_000, 40_000]))
    elif shape < 0.4:
        windows = windows.after(rng.choice([0, 3_000, 40_000]))
    elif shape < 0.5:  # a window entirely after the left record's time
        windows = windows.after(30_000).before(-rng.choice([0, 10_000, 30_000]))
    return windows


def random_records(rng: random.Random, n: int) -> list[tuple[str, Any, Any, int]]:
    """(topic, key, value, timestamp): mostly in time order, some late (some beyond any
    retention), duplicates of a key and timestamp, a few null keys and values; spanning
    minutes, so that the window stores' expiry runs (once per minute of stream time)."""
    keys: list[Any] = [0, 1, 2, "a", "b", -3, "aa"][:rng.randint(1, 7)]
    t = rng.randint(0, 50_000)
    out = []
    for i in range(n):
        t += rng.choice([0, 0, 1, 500, 1_000, 3_000, 10_000, 40_000])
        ts = t
        if rng.random() < 0.25:
            ts = max(0, t - rng.choice([1, 1_000, 5_000, 20_000, 60_000, 200_000]))
        topic = rng.choice(["topic1", "topic2"])
        key = None if rng.random() < 0.03 else rng.choice(keys)
        value = None if rng.random() < 0.03 else f"{'LR'[topic == 'topic2']}{i}"
        out.append((topic, key, value, ts))
    return out


def run_driver(mode: str, windows: JoinWindows, records: list[tuple[str, Any, Any, int]],
               cuts: list[int] | None) -> tuple[list[Any], list[Any], dict[str, int]]:
    """(output records, store contents after each batch or at the end, dropped records);
    ``cuts``: batch mode, a batch ending before each of these record positions."""
    driver = TopologyTestDriver(build(mode, windows), batch_mode=cuts is not None)
    try:
        topics = {t: driver.create_input_topic(t) for t in ("topic1", "topic2")}
        states = []

        def snapshot() -> None:
            states.append({name: dict(driver._store(name).items()) for name in STORES[mode]})

        for i, (topic, key, value, ts) in enumerate(records):
            if cuts is not None and i in cuts:
                driver.run_batch()
                snapshot()
            topics[topic].pipe_input(key, value, timestamp=ts)
        if cuts is not None:
            driver.run_batch()
        snapshot()
        out = [(r.key, r.value, r.timestamp)
               for r in driver.create_output_topic("out").read_records()]
        return out, states, driver.dropped_records
    finally:
        driver.close()


@pytest.mark.parametrize("how", ["record", "batch"])
@pytest.mark.parametrize("mode", ["inner", "left", "outer"])
@pytest.mark.parametrize("seed", range(12))
def test_random_joins_are_the_reference_joins(seed, mode, how, old_join):
    rng = random.Random(f"{seed}-{mode}-{how}")
    windows = random_windows(rng)
    records = random_records(rng, rng.randint(30, 160))
    cuts = (None if how == "record"
            else sorted(rng.sample(range(1, len(records)), rng.randint(1, 8))))
    got = run_driver(mode, windows, records, cuts)
    with old_join():
        expected = run_driver(mode, windows, records, cuts)
    assert got[0] == expected[0], f"output differs: {windows}"
    assert got[1] == expected[1], f"stores differ: {windows}"
    assert got[2] == expected[2]


# -- the batch host: replayed batches, other workers, RocksDB working copies ---------------


class Collector:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, topic, key, value, timestamp, headers, partition):
        self.sent.append((topic, key, value, timestamp))


def run_batches(mode: str, windows: JoinWindows, batches: list[list[RawRecord]],
                persistence: FileTaskStatePersistence, plan: list[int],
                between: Callable[[], None]) -> list[Any]:
    """Run the batches in ``plan``'s order (a batch again: a replay, from the state before
    it), calling ``between()`` after each; what each run sent, and the stores it left."""
    topology = build(mode, windows)
    config = StreamsConfig({"application.id": "join-index"})
    wiring = wire(topology, config)
    runs = []
    for batch in plan:
        collector = Collector()
        records = batches[batch]
        result = run_task_batch(topology, wiring, 0, 0, batch, config=config,
                                persistence=persistence, collector=collector,
                                records=lambda ordering, r=records: ordering.order(r))
        runs.append((collector.sent, result.changes, dict(result.dropped)))
        between()
    state = persistence.checkout(0, 0, plan[-1])
    runs.append({name: dict(state.store(name).items()) for name in STORES[mode]})
    persistence.checkin(state)
    return runs


class Workers:
    """Where a task's working copy goes after each batch, as Python workers come and go: it
    stays with the worker that ran it (``stay``), is lost (``lose``: the next worker rebuilds
    one, or opens its RocksDB copy), or is set aside while other workers run the task and comes
    back behind them (``aside``, ``back``: caught up in place, on the same store objects)."""

    def __init__(self) -> None:
        self.aside: dict[str, Any] = {}

    def after(self, action: str) -> None:
        cache = persistence_module._CACHE
        if action == "lose":
            self.close(cache)
        elif action == "aside" and not self.aside:
            self.aside = dict(cache)
            cache.clear()
        elif action == "back" and self.aside:
            self.close(cache)
            cache.update(self.aside)
            self.aside = {}

    def close(self, copies: dict[str, Any]) -> None:
        for state in copies.values():
            state.close()
        copies.clear()

    def done(self) -> None:
        self.close(self.aside)
        self.close(persistence_module._CACHE)


@pytest.mark.parametrize("copies", ["memory", "rocksdb"])
@pytest.mark.parametrize("mode", ["left", "outer"])
@pytest.mark.parametrize("seed", range(6))
def test_batches_on_working_copies_that_move_between_workers_are_the_reference(
        seed, mode, copies, tmp_path, old_join):
    if copies == "rocksdb":
        pytest.importorskip("rocksdict")
    rng = random.Random(f"{seed}-{mode}-{copies}")
    windows = random_windows(rng)
    encode = StreamsConfig({"application.id": "join-index"}).default_key_serde.serialize
    raws, offsets = [], {"topic1": 0, "topic2": 0}
    for topic, key, value, ts in random_records(rng, 240):
        raws.append(RawRecord(topic, 0, offsets[topic], ts, encode(topic, key),
                              encode(topic, value)))
        offsets[topic] += 1
    cuts = [0, *sorted(rng.sample(range(1, len(raws)), 7)), len(raws)]
    batches = [raws[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    # every batch, some twice (a task retried: the replay starts from the state before it)
    plan = []
    for b in range(len(batches)):
        plan.append(b)
        if rng.random() < 0.3:
            plan.append(b)
    moves = [rng.choice(["stay", "stay", "lose", "aside", "back"]) for _ in plan]

    def runs(location: str) -> list[Any]:
        local = str(tmp_path / f"{location}-local") if copies == "rocksdb" else None
        persistence = FileTaskStatePersistence(str(tmp_path / location), local_dir=local)
        workers, step = Workers(), iter(moves)
        # the tasks of earlier batches (and their indexes) stay in memory until the cyclic
        # collector runs: a new task must not take them for its own
        collecting = gc.isenabled()
        gc.disable()
        try:
            return run_batches(mode, windows, batches, persistence, plan,
                               lambda: workers.after(next(step)))
        finally:
            workers.done()
            if collecting:
                gc.enable()

    got = runs("new")
    with old_join():
        expected = runs("old")
    assert got == expiries_as_recorded(got, expected)


def expiries_as_recorded(got: list[Any], expected: list[Any]) -> list[Any]:
    """``expected`` (the reference's runs: it deletes each expired record) with its batches'
    changes as a store that records an expiry as one change (``EXPIRED_UP_TO``, RocksDB) has
    them: the deletions that the expiry covers are in that change."""
    out = []
    for new, old in zip(got, expected, strict=True):
        if isinstance(old, tuple):
            sent, changes, dropped = old
            changes = dict(changes)
            for name, of_store in new[1].items():
                up_to = of_store.get(EXPIRED_UP_TO)
                if up_to is not None:
                    changes[name] = {k: v for k, v in changes[name].items()
                                     if not (v is None and expired_by(k, up_to)
                                             and k not in of_store)}
                    changes[name][EXPIRED_UP_TO] = up_to
            old = (sent, changes, dropped)
        out.append(old)
    return out


# -- how much of the stores a join reads ---------------------------------------------------


def test_a_join_reads_each_store_whole_once_per_task(monkeypatch):
    """Indexes built once: a store is never scanned or sorted per record."""
    scans: dict[str, int] = {}
    items = InMemoryKeyValueStore.items

    def counted(self: InMemoryKeyValueStore) -> Iterator[tuple[Any, Any]]:
        scans[self.name] = scans.get(self.name, 0) + 1
        return items(self)

    def never(self: Any, first: Any) -> list[Any]:
        raise AssertionError("keys_with_first sorts a key's entries per call")

    monkeypatch.setattr(InMemoryKeyValueStore, "items", counted)
    monkeypatch.setattr(InMemoryKeyValueStore, "keys_with_first", never)
    rng = random.Random(5)
    records = [(rng.choice(["topic1", "topic2"]), rng.randrange(50), "v", i * 700)
               for i in range(3_000)]
    windows = JoinWindows.of_time_difference_and_grace(10_000, 5_000)
    out, _, _ = run_driver("outer", windows, records, None)
    assert len(out) > 1_000
    # one scan per store: the index built at the task's first use of it (the driver's
    # snapshot of the stores at the end reads them once more)
    assert scans == {name: 2 for name in STORES["outer"]}


@pytest.mark.parametrize("catch_up", [False, True])
def test_the_tasks_of_later_batches_take_over_the_index_of_their_working_copy(
        monkeypatch, tmp_path, catch_up):
    """A task of the next micro-batch on the same working copy does not scan the stores
    again; one whose copy was caught up from another worker's deltas does."""
    scans: dict[str, int] = {}
    items = InMemoryKeyValueStore.items

    def counted(self: InMemoryKeyValueStore) -> Iterator[tuple[Any, Any]]:
        scans[self.name] = scans.get(self.name, 0) + 1
        return items(self)

    monkeypatch.setattr(InMemoryKeyValueStore, "items", counted)
    rng = random.Random(6)
    encode = StreamsConfig({"application.id": "join-index"}).default_key_serde.serialize
    raws = []
    for i in range(600):
        topic = rng.choice(["topic1", "topic2"])
        raws.append(RawRecord(topic, 0, i, i * 700, encode(topic, rng.randrange(40)),
                              encode(topic, "v")))
    batches = [raws[i:i + 100] for i in range(0, 600, 100)]
    windows = JoinWindows.of_time_difference_and_grace(10_000, 5_000)
    persistence = FileTaskStatePersistence(str(tmp_path / "state"))
    workers = Workers()
    moves = iter(["stay", "aside", "back", "stay", "stay", "stay"] if catch_up
                 else ["stay"] * 6)
    try:
        run_batches("outer", windows, batches, persistence, list(range(6)),
                    lambda: workers.after(next(moves)))
    finally:
        workers.done()
    # the stores' last read is the test's own (run_batches reads them at the end)
    built = {name: n - 1 for name, n in scans.items()}
    if catch_up:  # the first task; the one after the copy set aside; the copy back, caught up
        assert built == {name: 3 for name in STORES["outer"]}
    else:
        assert built == {name: 1 for name in STORES["outer"]}


# -- the sorted timestamps ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_sorted_times_are_a_sorted_list(seed, monkeypatch):
    monkeypatch.setattr(_Times, "BLOCK", 4)  # many blocks, splits and emptied blocks
    rng = random.Random(seed)
    start = rng.sample(range(300), rng.randint(0, 40))
    times, ref = _Times(start), sorted(start)
    for _ in range(2_000):
        t = rng.randrange(300)
        if t in ref:
            times.remove(t)
            ref.remove(t)
        else:
            times.add(t)
            ref.insert(bisect_left(ref, t), t)
        q = rng.randrange(-5, 305)
        assert list(times) == ref
        assert all(0 < len(b) <= 2 * _Times.BLOCK for b in times._blocks)
        assert len(times) == len(ref)
        assert times.first() == (ref[0] if ref else None)
        assert times.last() == (ref[-1] if ref else None)
        i, j = bisect_left(ref, q), bisect_right(ref, q)
        assert times.at_least(q) == (ref[i] if i < len(ref) else None)
        assert times.above(q) == (ref[j] if j < len(ref) else None)


# -- the sequence of a window store's records ---------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_a_window_store_of_the_earlier_layout_keeps_its_records_in_order(kind, tmp_path):
    """A store written before seqs were the store's own (each key and timestamp's records
    numbered from 0, and the bookkeeping without the next seq) takes later records after them:
    duplicates come back in the order they were put, and no key is written twice."""
    if kind == "rocksdb":
        from streamtable.state.rocksdb import RocksDBTaskState

        copy = RocksDBTaskState.open(str(tmp_path / "copy"))
        store: Any = copy.store("w")
    else:
        store = InMemoryKeyValueStore("w", track_changes=True)
    store.put(META, ((1_000, 70_000), 1_000))
    store.put(("k", 1_000, 0), ("a", 1_000))
    store.put(("k", 1_000, 1), ("b", 1_000))
    store.put(("k", 900, 0), ("z", 900))
    window = stream_join.JoinWindowStore(store, object(), retention=10_000)  # type: ignore[arg-type]
    assert window._ranged == (kind == "rocksdb")
    assert window.put("k", "c", 1_000) and window.put("k", "d", 1_000)
    assert window.put("j", "e", 1_000)
    assert window.fetch("k", 0, 2_000) == [(900, "z"), (1_000, "a"), (1_000, "b"),
                                            (1_000, "c"), (1_000, "d")]
    first = stream_join.SEQ_AFTER_UPGRADE
    assert sorted(k for k, _ in store.items() if k != META) == [
        ("j", 1_000, first + 2), ("k", 900, 0), ("k", 1_000, 0), ("k", 1_000, 1),
        ("k", 1_000, first), ("k", 1_000, first + 1)]
    assert store.get(META)[0] == (1_000, 70_000, first + 3)
    assert len(store) == 7  # META, three records before, three after
    if kind == "rocksdb":
        copy.close()


def test_a_window_store_numbers_its_records_in_the_order_they_were_put():
    store = InMemoryKeyValueStore("w", track_changes=True)
    window = stream_join.JoinWindowStore(store, object(), retention=10_000)  # type: ignore[arg-type]
    for key, value, ts in [("k", "a", 5), ("j", "b", 5), ("k", "c", 5), ("k", "d", 3)]:
        assert window.put(key, value, ts)
    assert not window.put("k", "late", -20_000)  # older than the retention: no seq taken
    assert window.put("k", "e", 5)
    assert sorted(k for k, _ in store.items() if k != META) == [
        ("j", 5, 1), ("k", 3, 3), ("k", 5, 0), ("k", 5, 2), ("k", 5, 4)]
    assert window.fetch("k", 0, 10) == [(3, "d"), (5, "a"), (5, "c"), (5, "e")]
