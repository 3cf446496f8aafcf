"""A new version of the topology at start: keep the state that means the same, build new
stores, drop removed ones (see :mod:`streamtable.topology.evolution` and docs/upgrading.md).

Each run of an application keeps its state under ``<state.location>/<application.id>/run-<id>``
with the fingerprint of the topology that wrote it (``topology.json``). When a start finds
another topology there, it plans the upgrade and, unless a store is refused:

1. builds the new stores (and new outputs) when ``upgrade.new.state.from=earliest``: a
   *backfill* query runs the part of the new topology they need (their writers and everything
   upstream, each upstream store in a fresh copy of its own) over the input topics from their
   earliest offsets to where the application is, writing only the new outputs;
2. writes the state of every task of the new topology into a new run directory, as one
   snapshot per task after the last committed batch: the kept stores' entries (from whichever
   sub-topology and name held them), the backfilled stores', and the task's stream time;
3. switches to the new run (the run id in the query's checkpoint: one atomic write), then
   deletes the old run's state and the backfill's, and replaces the new and dropped stores in
   the serving store.

A crash before step 3 leaves the old run as it was (the next start plans again); after it,
the new run is complete. The query's offsets are not touched: the application goes on from
where it was. The work is done on the driver, one task's state at a time.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamtable.engine.task import punctuation_store
from streamtable.engine.wiring import state_version, wire
from streamtable.processors.stateless import Discard
from streamtable.serving.codec import encode_key, encode_value
from streamtable.state.persistence import FileTaskStatePersistence
from streamtable.state.task_state import TaskState
from streamtable.state.versioned import VERSIONED_META_STORE, renamed_versioned_meta
from streamtable.state.window_store import WINDOW_META_STORE
from streamtable.storage import join, storage_at
from streamtable.topology.evolution import KEEP, NEW, UpgradePlan, plan_upgrade
from streamtable.topology.fingerprint import TopologyChangedError, topology_fingerprint
from streamtable.topology.graph import Node, NodeKind, Topology

if TYPE_CHECKING:
    from streamtable.runtime.spark.app import StreamsApp

log = logging.getLogger("streamtable.app")

FINGERPRINT = "topology.json"


def _batches(directory: Path) -> list[int]:
    try:
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    except OSError:
        return []


def committed_batch(checkpoint_dir: Path) -> int:
    """The last batch the query committed (-1: none)."""
    done = _batches(checkpoint_dir / "query" / "commits")
    return done[-1] if done else -1


def pending_batch(checkpoint_dir: Path) -> int | None:
    """A batch planned (its offsets written) but not committed: a run stopped inside it."""
    planned = _batches(checkpoint_dir / "query" / "offsets")
    last = committed_batch(checkpoint_dir)
    return planned[-1] if planned and planned[-1] > last else None


def _untouched(app: StreamsApp, old: dict[str, Any], batch: int) -> bool:
    """Whether the deployed version wrote nothing of ``batch`` that outlives it: no output
    record (no writer's ``started`` marker, see ``kafka/sink.py``) and no served change. Its
    task state does not count: the upgrade reads the state after the batch before."""
    if app.serving.last_batch() >= batch:
        return False
    from streamtable.kafka.sink import batch_started

    if not old.get("tasks"):
        return False  # state from before task counts were kept: cannot tell
    markers = join(app.shared_location, "sink")
    writers = ["0"] + [f"{sid}-{task}" for sid, n in old.get("tasks", {}).items()
                       for task in range(int(n))]
    return not any(batch_started(markers, app.application_id, w, batch) for w in writers)


def _forget_planned(checkpoint_dir: Path, committed: int) -> None:
    """Drop the query's plans of batches after ``committed`` (written by the deployed version,
    which wrote nothing of them): the new version plans them again."""
    offsets = checkpoint_dir / "query" / "offsets"
    for batch in _batches(offsets):
        if batch > committed:
            for name in (str(batch), f".{batch}.crc"):
                (offsets / name).unlink(missing_ok=True)
            log.info("batch %d was planned by the deployed version, which stopped before "
                     "writing any of it: the new version plans it again", batch)


def read_fingerprint(app: StreamsApp) -> dict[str, Any] | None:
    """The fingerprint of the topology the current run's state was written for: with the
    state, or (written before) beside the query's checkpoint."""
    storage = storage_at(app.shared_location)
    if storage.exists(FINGERPRINT):
        found: dict[str, Any] = json.loads(storage.read(FINGERPRINT))
        return found
    legacy = app.checkpoint_dir / FINGERPRINT
    if legacy.exists():
        found = json.loads(legacy.read_text())
        return found
    return None


def write_fingerprint(location: str, fingerprint: dict[str, Any]) -> None:
    storage_at(location).write(FINGERPRINT, json.dumps(fingerprint, indent=1,
                                                       sort_keys=True).encode())


def current_fingerprint(app: StreamsApp) -> dict[str, Any]:
    """The fingerprint of ``app``'s topology as it runs now: with its sub-topologies' task
    counts and the state versions a batch has."""
    plan = app._plan or app.prepare()
    fp = topology_fingerprint(app.topology)
    fp["tasks"] = {str(s.subtopology): s.partitions for s in plan.stages}
    fp["tasks"].update({str(st.id): 1 for st in app.topology.global_subtopologies})
    fp["rounds_per_batch"] = wire(app.topology, app.config).rounds_per_batch
    return fp


def upgrade(app: StreamsApp) -> UpgradePlan | None:
    """Compare ``app``'s topology with the one its state was written for and carry the state
    over (see the module doc); raise :class:`TopologyChangedError` when a store cannot be
    kept. Returns the plan carried out, or None when there was nothing to do."""
    new = current_fingerprint(app)
    old = read_fingerprint(app)
    committed = committed_batch(app.checkpoint_dir)
    if old is None:
        write_fingerprint(app.shared_location, new)
        return None
    plan = plan_upgrade(old, new)
    rebuild = set(old.get("rebuild", ()))
    if plan.refused or plan.refused_whole:
        raise plan.refusal(app.application_id, app.app_file)
    if plan.unchanged and not rebuild:
        if old != new:  # the same topology; the fingerprint in the current format
            write_fingerprint(app.shared_location, new)
        return None
    pending = pending_batch(app.checkpoint_dir)
    if pending is not None and not _untouched(app, old, pending):
        raise TopologyChangedError(
            f"{app.application_id} was stopped inside batch {pending} (its offsets are planned, "
            "its results not committed), and only the version that planned it can finish it "
            "exactly once: the new version would replay it with other operators, while some "
            "of its output may be written already. Start the deployed version again until it "
            f"has caught up (`streamtable run {app.app_file} --until-caught-up` with that "
            "version's file), then this one; or run `streamtable reset` (the input is processed "
            "again from the start)")
    if pending is not None:
        _forget_planned(app.checkpoint_dir, committed)
    log.info("upgrading %s:\n%s", app.application_id,
             plan.text(str(app.config["upgrade.new.state.from"])).rstrip())
    _carry_over(app, plan, old, new, committed, rebuild)
    return plan


def _carry_over(app: StreamsApp, plan: UpgradePlan, old: dict[str, Any], new: dict[str, Any],
                committed: int, rebuild: set[str]) -> None:
    earliest = app.config["upgrade.new.state.from"] == "earliest"
    new_stores = [s.name for s in plan.of(NEW)]
    # a store `reset --store` rebuilds is built from the earliest offsets whatever the setting
    targets = [s for s in new_stores if earliest or s in rebuild]
    outputs = [o.topic for o in plan.outputs if o.action == NEW] if earliest else []
    run = secrets.token_hex(6)
    location = join(app.application_location, f"run-{run}")
    backfill = None
    if committed >= 0 and (targets or outputs):
        backfill = Backfill(app, run, targets, outputs)
        backfill.run(committed)
    old_state = FileTaskStatePersistence(join(app.shared_location, "tasks"))
    new_state = FileTaskStatePersistence(join(location, "tasks"))
    kept = {s.name: s for s in plan.of(KEEP)}
    version = state_version(wire(app.topology, app.config), committed + 1) - 1
    old_rounds = int(old.get("rounds_per_batch", new["rounds_per_batch"]))
    old_version = (committed + 1) * old_rounds - 1
    serving: dict[str, list[Any]] = {s: [] for s in targets if app.topology.stores[s].queryable}
    topo = app.topology
    for st in topo.subtopologies + topo.global_subtopologies:
        sources = {s.old_subtopology for s in kept.values() if s.name in st.stores}
        if not sources:  # no store kept: the sub-topology as it was, by its input topics
            sources = {int(sid) for sid, same in _subtopologies_by_inputs(old, st).items()
                       if same}
        for task in range(int(new["tasks"][str(st.id)])):
            state = TaskState()
            for sid in sorted(s for s in sources if s is not None):
                before = old_state.checkout(sid, task, old_version)
                state.stream_time = max(state.stream_time, before.stream_time)
                for name in st.stores:
                    if name in kept:
                        state.store(name).restore(
                            dict(before.store(kept[name].old_name or name).items()), fresh=True)
                renames = {kept[n].old_name or n: n for n in st.stores if n in kept}
                meta = before.stores.get(WINDOW_META_STORE)
                if meta is not None:
                    state.store(WINDOW_META_STORE).restore(
                        {renames[k]: v for k, v in meta.items() if k in renames}, fresh=False)
                versions = before.stores.get(VERSIONED_META_STORE)
                if versions is not None:
                    state.store(VERSIONED_META_STORE).restore(
                        renamed_versioned_meta(versions.items(), renames), fresh=False)
                if len(sources) == 1:
                    held = before.stores.get(punctuation_store(sid))
                    if held is not None:
                        state.store(punctuation_store(st.id)).restore(dict(held.items()),
                                                                      fresh=True)
            if backfill is not None:
                built = [s for s in st.stores if s in targets]
                if built:
                    b = backfill.state(st.stores, task)
                    state.stream_time = max(state.stream_time, b.stream_time)
                    for name in built:
                        entries = dict(b.store(name).items())
                        state.store(name).restore(entries, fresh=True)
                        if name in serving:
                            serving[name] += [(name, encode_key(k), encode_value(v), task)
                                              for k, v in entries.items()]
                    versions = b.stores.get(VERSIONED_META_STORE)
                    if versions is not None:  # the backfilled versioned stores' expiry index
                        state.store(VERSIONED_META_STORE).restore(
                            renamed_versioned_meta(versions.items(), {n: n for n in built}),
                            fresh=False)
            for s in state.stores.values():
                s.drain_changes()
            if state.entries() or state.stream_time >= 0:
                new_state.task_store(st.id, task).write_snapshot(state, version)
    write_fingerprint(location, {**new, "rebuild": []} if rebuild else new)
    dropped_served = [s.name for s in plan.stores if s.queryable and s.action != KEEP]
    previous = app.shared_location
    previous_local = app.app_dir / "local" / f"run-{app._run_id()}"
    app.switch_run(run)  # the commit of the upgrade
    storage_at(previous).clear()
    shutil.rmtree(previous_local, ignore_errors=True)
    if backfill is not None:
        backfill.clean()
    if dropped_served or serving:
        app.serving.replace_stores(sorted(set(dropped_served) | set(serving)),
                                   [c for changes in serving.values() for c in changes])
    log.info("upgraded %s: %d stores kept, %d built, %d dropped", app.application_id,
             len(kept), len(targets), len(plan.of("drop")))


def _subtopologies_by_inputs(old: dict[str, Any], st: Any) -> dict[str, bool]:
    """Old sub-topology id -> whether it read exactly the input topics of ``st`` (for a
    sub-topology without stores: its stream time and punctuations)."""
    out: dict[str, bool] = {}
    for sub in old["subtopologies"]:
        topics = {t for n in sub["nodes"].values() if n["kind"] == "Source" for t in n["topics"]}
        out[str(sub["id"])] = bool(topics) and topics == set(st.source_topics)
    return out


class Backfill:
    """The query that builds an upgrade's new stores and outputs from the input's earliest
    offsets up to where the application is (see the module doc)."""

    def __init__(self, app: StreamsApp, run: str, stores: list[str], outputs: list[str]):
        from streamtable.runtime.spark.app import StreamsApp

        self.app = app
        self.topology = pruned(app.topology, stores, outputs, app)
        config = {k: v for k, v in app.config.as_dict().items() if k != "serving.url"}
        self.inner = StreamsApp(
            self.topology, f"{app.application_id}-upgrade-{run}", config=config,
            spark=app.spark, development_broker=app.development_broker,
            master=app.master, clock=app.clock)

    def run(self, committed: int) -> None:
        from streamtable.runtime.spark.offsets import _end_offsets

        ends = _end_offsets(self.app.checkpoint_dir / "query" / "offsets", committed) or {}
        self.inner.end_offsets = {t: ps for t, ps in ends.items() if not t.startswith("@")}
        log.info("building %s from the earliest offsets up to %s",
                 ", ".join(sorted(set(self.topology.stores) | set(self.topology.sink_topics))),
                 self.inner.end_offsets)
        self.inner.run_until_caught_up()

    def state(self, stores: Iterable[str], task: int) -> TaskState:
        """The backfilled state of ``task`` of the sub-topology holding ``stores``."""
        wanted = set(stores)
        st = next((s for s in self.topology.subtopologies + self.topology.global_subtopologies
                   if wanted & set(s.stores)), None)
        if st is None:
            return TaskState()
        last = committed_batch(self.inner.checkpoint_dir)
        version = state_version(wire(self.topology, self.inner.config), last + 1) - 1
        return self.inner.task_state.checkout(st.id, task, version)

    def clean(self) -> None:
        storage_at(self.inner.application_location).clear()
        shutil.rmtree(self.inner.app_dir, ignore_errors=True)


def pruned(topology: Topology, stores: list[str], outputs: list[str],
           app: StreamsApp) -> Topology:
    """The part of ``topology`` that computes ``stores`` and ``outputs``: their writers and
    everything upstream of them (with the writers of every store those read), the other
    children cut off (a :class:`Discard` stands for each, so that forwarding by name works)."""
    writers: dict[str, list[str]] = {}
    topic_writers: dict[str, list[str]] = {}
    for name, node in topology.nodes.items():
        reads = set(node.options.get("reads", ()))
        for s in node.stores:
            if s not in reads:
                writers.setdefault(s, []).append(name)
        if node.kind is NodeKind.SINK:
            for t in node.topics:
                topic_writers.setdefault(t, []).append(name)
    need: set[str] = set()
    todo = [w for s in stores for w in writers.get(s, [])]
    todo += [w for t in outputs for w in topic_writers.get(t, [])]
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        node = topology.nodes[name]
        todo += node.parents
        for s in [*node.stores, *node.options.get("global_stores", ())]:
            todo += writers.get(s, [])
        if node.kind is NodeKind.SOURCE:
            for t in node.topics:
                if topology.topics[t].internal:
                    todo += topic_writers.get(t, [])
    nodes: dict[str, Node] = {}
    for name in topology.nodes:  # in the topology's order, which numbers the sub-topologies
        if name in need:
            node = topology.nodes[name]
            nodes[name] = replace(node, children=list(node.children))
        elif any(p in need for p in topology.nodes[name].parents):
            nodes[name] = Node(name, NodeKind.PROCESSOR, Discard,
                               [p for p in topology.nodes[name].parents if p in need])
    for node in nodes.values():
        node.children = [c for c in node.children if c in nodes]
    used_stores = {s for n in nodes.values() for s in n.stores}
    used_topics = {t for n in nodes.values() for t in n.topics}
    main_plan = app._plan or app.prepare()
    tasks = {s.subtopology: s.partitions for s in main_plan.stages}
    topics = {}
    for t in used_topics:
        spec = topology.topics[t]
        if spec.internal:  # the task count of the stage reading it in the application
            reader = topology.subtopology_of_topic(t)
            if reader is not None:
                spec = replace(spec, partitions=tasks.get(reader.id, spec.partitions))
        topics[t] = spec
    # a sub-topology reading input topics has their partitions' tasks, as in the application
    return Topology(nodes, {s: topology.stores[s] for s in used_stores}, topics)
