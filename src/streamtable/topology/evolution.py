"""Upgrading an application: what a new version of its topology keeps, rebuilds and drops of
the state the deployed version wrote (see docs/upgrading.md).

Stores are matched by name between the deployed version (its fingerprint, kept with the
state) and the new one:

* **kept**: the same name, kind, serdes, settings and upstream (every operator, topic and serde
  between the input topics and the store; functions inside operators do not count): its state
  is carried over as it is, whichever sub-topology it is in now;
* **new**: a name the deployed version did not have: built from the input, from the earliest
  offsets (backfilled before the application goes on) or from now on, as chosen
  (``upgrade.new.state.from``);
* **dropped**: a name the new version does not have: its state is deleted;
* **refused**: the same name with another meaning (its kind, serdes, windows or upstream
  changed): keeping its entries would mix what two versions computed, so the start is refused,
  naming the store and ``streamtable reset --store NAME``, which rebuilds just that store.

Outputs (external topics written) are matched by topic: **kept**, **changed** (its records are
computed another way from the next record on; what was written stays), **new** (written from
the chosen offsets) and **no longer written**.

>>> from streamtable import StreamsBuilder
>>> from streamtable.topology.fingerprint import topology_fingerprint
>>> def app(alerts=False, by_user=False):
...     b = StreamsBuilder()
...     views = b.stream("views")
...     views.group_by_key().count("views-per-page")
...     if alerts:
...         views.filter(lambda page, user: user is None).to("anonymous-views")
...     if by_user:
...         views.group_by(lambda page, user: user).count("views-per-user")
...     return b.build()
>>> plan = plan_upgrade(topology_fingerprint(app()),
...                     topology_fingerprint(app(alerts=True, by_user=True)))
>>> print(plan.text(new_state_from="earliest"), end="")
stores:
  views-per-page: kept
  views-per-user: new, built from the earliest offsets of its input topics
outputs:
  anonymous-views: new, written from the earliest offsets of its input topics
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamtable.topology.fingerprint import (
    FORMAT,
    INTERNAL_KEYS,
    TopologyChangedError,
    fingerprint_diff,
)

__all__ = ["KEEP", "NEW", "DROP", "REFUSE", "StorePlan", "OutputPlan", "UpgradePlan",
           "NEW_STATE_FROM", "plan_upgrade"]

KEEP, NEW, DROP, REFUSE = "keep", "new", "drop", "refuse"
CHANGED, GONE = "changed", "gone"
#: where new stores and outputs start: the setting ``upgrade.new.state.from``
NEW_STATE_FROM = ("earliest", "latest")


@dataclass
class StorePlan:
    """What happens to one store: ``action`` is keep, new, drop or refuse; ``reason`` says why
    a store is refused; ``old_name`` is its name in the deployed state (a generated name
    written before stable names, else the name); ``old_subtopology`` / ``subtopology`` where
    its state is in the deployed and the new version."""

    name: str
    action: str
    reason: str = ""
    old_name: str | None = None
    old_subtopology: int | None = None
    subtopology: int | None = None
    queryable: bool = False


@dataclass
class OutputPlan:
    """What happens to one output topic: keep, changed, new or gone."""

    topic: str
    action: str
    #: the new stores (or stores rebuilt by reset) its records are computed through
    through_new: list[str] = field(default_factory=list)


@dataclass
class UpgradePlan:
    """The stores and outputs of an upgrade (see the module doc); ``unchanged`` when the new
    version has the deployed one's shape, so there is nothing to do."""

    stores: list[StorePlan] = field(default_factory=list)
    outputs: list[OutputPlan] = field(default_factory=list)
    inputs_added: list[str] = field(default_factory=list)
    inputs_removed: list[str] = field(default_factory=list)
    unchanged: bool = False
    #: set when the whole state must be rebuilt (state written in an older format)
    refused_whole: str = ""

    def of(self, action: str) -> list[StorePlan]:
        """The stores planned for ``action``."""
        return [s for s in self.stores if s.action == action]

    @property
    def refused(self) -> list[StorePlan]:
        return self.of(REFUSE)

    @property
    def backfilled(self) -> list[str]:
        """The stores and output topics built from the input when new state starts from the
        earliest offsets."""
        return [s.name for s in self.of(NEW)] + [o.topic for o in self.outputs
                                                 if o.action == NEW]

    def text(self, new_state_from: str = "earliest") -> str:
        """What the upgrade keeps, rebuilds and drops, one line per store and output."""
        start = ("built from the earliest offsets of its input topics"
                 if new_state_from == "earliest" else "empty, built from the next records on")
        written = ("written from the earliest offsets of its input topics"
                   if new_state_from == "earliest" else "written from the next records on")
        if self.refused_whole:
            return f"refused: {self.refused_whole}\n"
        lines = ["stores:"] if self.stores else []
        for s in self.stores:
            what = {KEEP: "kept", DROP: "dropped (its state is deleted)", NEW: f"new, {start}",
                    REFUSE: f"cannot be kept: {s.reason}; `streamtable reset --store {s.name}` "
                            "rebuilds it from the earliest offsets"}[s.action]
            if s.action == KEEP and s.old_name and s.old_name != s.name:
                what += f" (its state was written as {s.old_name})"
            lines.append(f"  {s.name}: {what}")
        if self.outputs:
            lines.append("outputs:")
        for o in self.outputs:
            what = {KEEP: "kept", NEW: f"new, {written}",
                    CHANGED: "computed another way from the next record on (what was written "
                             "stays)",
                    GONE: "no longer written"}[o.action]
            if o.through_new and o.action in (KEEP, CHANGED):
                what += f", through the new store{'s' if len(o.through_new) > 1 else ''} "
                what += ", ".join(o.through_new)
            lines.append(f"  {o.topic}: {what}")
        for t in self.inputs_added:
            lines.append(f"input {t}: new, read from its beginning")
        for t in self.inputs_removed:
            lines.append(f"input {t}: no longer read")
        if self.unchanged:
            lines.append("unchanged: every store and output is kept")
        return "\n".join(lines) + "\n"

    def refusal(self, application_id: str, app_file: str = "app.py") -> TopologyChangedError:
        """The error of a start this plan refuses: the stores that cannot be kept, why, and
        the commands that rebuild them."""
        if self.refused_whole:
            return TopologyChangedError(
                f"the state of {application_id} cannot be kept by this version: "
                f"{self.refused_whole}")
        stores = self.refused
        names = " ".join(f"--store {s.name}" for s in stores)
        what = " and ".join(f"{s.name!r} ({s.reason})" for s in stores)
        return TopologyChangedError(
            f"the new version of {application_id} cannot keep the state of "
            f"{'stores' if len(stores) > 1 else 'store'} {what}: its entries were computed by "
            f"the deployed version, and mixing them with the new version's would give wrong "
            f"results. Run `streamtable reset "
            f"{app_file} {names}` to rebuild just {'them' if len(stores) > 1 else 'it'} from the "
            f"earliest offsets of {'their' if len(stores) > 1 else 'its'} input topics (the "
            f"other stores keep their state), or deploy the previous version again; "
            f"`streamtable describe --diff OLD.py NEW.py` shows what an upgrade keeps")


def _reason(was: dict[str, Any], now: dict[str, Any]) -> str:
    if was["kind"] != now["kind"]:
        return f"its type changed from {was['kind']} to {now['kind']}"
    reasons = []
    if was["spec"] != now["spec"]:
        reasons.append("its serdes or settings (windows, retention) changed")
    if was["upstream"] != now["upstream"]:
        reasons.append("the operators, topics or serdes upstream of it changed")
    return " and ".join(reasons)


def plan_upgrade(old: dict[str, Any], new: dict[str, Any]) -> UpgradePlan:
    """The plan from the deployed version's fingerprint ``old`` to the new version's ``new``
    (both from :func:`~streamtable.topology.fingerprint.topology_fingerprint`; ``old`` may be
    of format 1, written before stable store names: see :func:`_plan_from_format_1`)."""
    if old.get("format", 1) < FORMAT:
        return _plan_from_format_1(old, new)
    plan = UpgradePlan()
    was, now = old["state"], new["state"]
    old_tasks, new_tasks = old.get("tasks", {}), new.get("tasks", {})
    for name in sorted(was.keys() | now.keys()):
        if name not in now:
            plan.stores.append(StorePlan(name, DROP, old_name=name,
                                         old_subtopology=was[name]["subtopology"],
                                         queryable=was[name]["queryable"]))
            continue
        n = now[name]
        if name not in was:
            plan.stores.append(StorePlan(name, NEW, subtopology=n["subtopology"],
                                         queryable=n["queryable"]))
            continue
        w = was[name]
        reason = _reason(w, n)
        tasks_were = old_tasks.get(str(w["subtopology"]))
        tasks_now = new_tasks.get(str(n["subtopology"]))
        if not reason and tasks_were and tasks_now and tasks_were != tasks_now:
            reason = (f"its sub-topology runs {tasks_now} tasks instead of {tasks_were} (its "
                      "input topics' partitions changed), so its keys belong to other tasks")
        plan.stores.append(StorePlan(name, REFUSE if reason else KEEP, reason, name,
                                     w["subtopology"], n["subtopology"], n["queryable"]))
    old_out, new_out = old.get("outputs", {}), new.get("outputs", {})
    for topic in sorted(old_out.keys() | new_out.keys()):
        action = (GONE if topic not in new_out else NEW if topic not in old_out
                  else KEEP if old_out[topic] == new_out[topic] else CHANGED)
        new_stores = {s.name for s in plan.stores if s.action == NEW}
        through = [s for s in new.get("output_stores", {}).get(topic, []) if s in new_stores]
        plan.outputs.append(OutputPlan(topic, action, through))
    plan.inputs_added = sorted(set(new["inputs"]) - set(old["inputs"]))
    plan.inputs_removed = sorted(set(old["inputs"]) - set(new["inputs"]))
    plan.unchanged = (all(s.action == KEEP and s.old_subtopology == s.subtopology
                          for s in plan.stores)
                      and all(o.action == KEEP for o in plan.outputs)
                      and not plan.inputs_added and not plan.inputs_removed
                      and len(old["subtopologies"]) == len(new["subtopologies"]))
    return plan


def _plan_from_format_1(old: dict[str, Any], new: dict[str, Any]) -> UpgradePlan:
    """State written before stable store names (fingerprint format 1) names generated stores
    by Kafka Streams' counters. When the new version is that topology (its shape under the
    counter names, ``new["legacy_shape"]``, is the one kept), every store is kept under its
    new name; any other change is refused, as before: deploy the same topology once with
    this streamtable, then change it."""
    plan = UpgradePlan()
    if old.get("internal_keys") != INTERNAL_KEYS and new.get("internal_keys"):
        plan.refused_whole = (
            "the keys of internal topics were written another way (before "
            f"{INTERNAL_KEYS}, equal keys made in different ways could reach different tasks), "
            "so the state behind them must be rebuilt: run `streamtable reset`")
        return plan
    changes = fingerprint_diff(old, new.get("legacy_shape", new))
    if changes:
        shown = "; ".join(changes[:8]) + (f"; and {len(changes) - 8} more"
                                          if len(changes) > 8 else "")
        plan.refused_whole = (
            f"its state was written by an older streamtable, which named generated stores by "
            f"their position, and the topology changed since ({shown}). Start the topology "
            "that wrote the state once with this streamtable (its stores are then renamed and "
            "kept), then upgrade it; or run `streamtable reset` (the input is processed again "
            "from the start)")
        return plan
    for name, n in sorted(new["state"].items()):
        plan.stores.append(StorePlan(name, KEEP, old_name=n["legacy"] or name,
                                     old_subtopology=n["subtopology"],
                                     subtopology=n["subtopology"], queryable=n["queryable"]))
    plan.outputs = [OutputPlan(t, KEEP) for t in sorted(new.get("outputs", {}))]
    plan.unchanged = all(s.old_name == s.name for s in plan.stores)
    return plan
