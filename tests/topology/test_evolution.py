"""What a new version of a topology keeps, rebuilds and drops of the deployed one's state."""

from __future__ import annotations

import json

from streamtable import JoinWindows, Materialized, StreamsBuilder, TimeWindows
from streamtable.topology.evolution import (
    CHANGED,
    DROP,
    GONE,
    KEEP,
    NEW,
    REFUSE,
    plan_upgrade,
)
from streamtable.topology.fingerprint import legacy_fingerprint, topology_fingerprint


def orders_app(*, alerts: bool = False, per_region: bool = False, filtered: bool = False,
               value_serde: str | None = None, window_ms: int | None = None,
               totals_name: str = "totals", join_customers: bool = False,
               drop_totals: bool = False) -> dict:
    b = StreamsBuilder()
    orders = b.stream("orders", value_serde=value_serde)
    if alerts:  # a new branch and a new output
        orders.filter(lambda k, o: o["amount"] > 1000).to("big-orders")
    upstream = orders.filter(lambda k, o: o["ok"]) if filtered else orders
    grouped = upstream.group_by(lambda k, o: o["customer"])
    if window_ms is not None:
        grouped.windowed_by(TimeWindows.of(window_ms)).count(totals_name)
    elif not drop_totals:
        grouped.count(totals_name).to_stream().to("totals-out")
    orders.group_by_key().count()  # an unnamed store
    customers = b.table("customers", materialized="customers")
    if per_region:  # a new aggregation of an existing table
        customers.group_by(lambda k, c: (c["region"], c)).count("per-region")
    if join_customers:  # a new reader of an existing store
        orders.join(customers, lambda o, c: (o, c)).to("enriched")
    return topology_fingerprint(b.build())


def actions(plan) -> dict[str, str]:
    return {s.name: s.action for s in plan.stores} | {o.topic: o.action for o in plan.outputs}


def test_the_same_topology_is_unchanged_and_keeps_everything():
    plan = plan_upgrade(orders_app(), orders_app())
    assert plan.unchanged
    assert set(actions(plan).values()) == {KEEP}


def test_a_filter_branch_and_a_new_output_keep_every_store_and_output():
    plan = plan_upgrade(orders_app(), orders_app(alerts=True))
    got = actions(plan)
    assert got.pop("big-orders") == NEW
    assert set(got.values()) == {KEEP}, got
    assert not plan.unchanged
    assert plan.backfilled == ["big-orders"]


def test_a_new_aggregation_is_new_and_the_rest_is_kept():
    plan = plan_upgrade(orders_app(), orders_app(per_region=True))
    got = actions(plan)
    assert got.pop("per-region") == NEW
    assert set(got.values()) == {KEEP}
    new = plan.of(NEW)[0]
    assert new.subtopology is not None and new.old_subtopology is None


def test_a_removed_store_is_dropped_and_its_output_no_longer_written():
    plan = plan_upgrade(orders_app(), orders_app(drop_totals=True))
    got = actions(plan)
    assert got["totals"] == DROP and got["totals-out"] == GONE
    assert got["customers"] == KEEP


def test_a_renamed_store_is_dropped_and_the_new_name_built():
    got = actions(plan_upgrade(orders_app(), orders_app(totals_name="sums")))
    assert got["totals"] == DROP and got["sums"] == NEW


def test_a_store_whose_upstream_changed_is_refused_naming_it_and_reset_store():
    plan = plan_upgrade(orders_app(), orders_app(filtered=True))
    refused = {s.name: s.reason for s in plan.refused}
    assert "upstream" in refused["totals"]
    # the output computed from it changed too, and the unnamed store on the unfiltered stream
    # and the table keep their state
    got = actions(plan)
    assert got["totals-out"] == CHANGED and got["customers"] == KEEP
    assert [n for n, a in got.items() if a == KEEP and n.startswith("KSTREAM-AGGREGATE")]
    message = str(plan.refusal("orders-app", "orders.py"))
    assert "store 'totals'" in message and "upstream" in message
    assert "streamtable reset orders.py --store totals" in message


def test_an_unnamed_store_whose_upstream_changed_is_refused_too():
    def app(filtered: bool) -> dict:
        b = StreamsBuilder()
        s = b.stream("in")
        (s.filter(lambda k, v: v) if filtered else s).group_by_key().count()
        return topology_fingerprint(b.build())

    plan = plan_upgrade(app(False), app(True))
    assert [s.action for s in plan.stores] == [REFUSE]
    assert plan.stores[0].name.startswith("KSTREAM-AGGREGATE-STATE-STORE-")


def test_changed_serdes_windows_and_types_are_refused_with_their_reason():
    serde = plan_upgrade(orders_app(), orders_app(value_serde="json"))
    assert "upstream" in {s.name: s.reason for s in serde.refused}["totals"]
    windows = plan_upgrade(orders_app(window_ms=1000), orders_app(window_ms=2000))
    assert "settings" in {s.name: s.reason for s in windows.refused}["totals"]
    kind = plan_upgrade(orders_app(), orders_app(window_ms=1000))
    assert "type changed from key-value to window" in {
        s.name: s.reason for s in kind.refused}["totals"]


def test_a_store_serde_change_is_refused():
    def app(serde: str) -> dict:
        b = StreamsBuilder()
        b.stream("in").group_by_key().count(Materialized.as_("c").with_value_serde(serde))
        return topology_fingerprint(b.build())

    plan = plan_upgrade(app("long"), app("string"))
    assert plan.refused[0].name == "c" and "serdes" in plan.refused[0].reason


def test_a_new_join_reading_an_existing_table_keeps_the_table():
    plan = plan_upgrade(orders_app(), orders_app(join_customers=True))
    got = actions(plan)
    assert got["customers"] == KEEP and got["enriched"] == NEW


def test_a_stream_stream_join_keeps_its_stores_when_a_branch_is_added():
    def app(branch: bool) -> dict:
        b = StreamsBuilder()
        clicks, views = b.stream("clicks"), b.stream("views")
        if branch:
            clicks.filter(lambda k, v: v).to("some-clicks")
        clicks.join(views, lambda c, v: (c, v),
                    JoinWindows.of_time_difference_and_grace(100, 0)).to("joined")
        return topology_fingerprint(b.build())

    got = actions(plan_upgrade(app(False), app(True)))
    assert got.pop("some-clicks") == NEW and set(got.values()) == {KEEP}, got


def test_other_task_counts_refuse_a_store():
    old, new = orders_app(), orders_app()
    sid = str(old["state"]["totals"]["subtopology"])
    old["tasks"], new["tasks"] = {sid: 2}, {sid: 4}
    assert "4 tasks instead of 2" in {s.name: s.reason
                                      for s in plan_upgrade(old, new).refused}["totals"]


def test_the_plan_reads_a_fingerprint_kept_as_json():
    old = json.loads(json.dumps(orders_app()))
    assert plan_upgrade(old, orders_app()).unchanged


def test_state_from_before_stable_names_is_kept_under_the_new_names_for_the_same_topology():
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: v).count()
    topology = b.build()
    old = legacy_fingerprint(topology)  # what the previous streamtable wrote
    plan = plan_upgrade(old, topology_fingerprint(topology))
    (store,) = plan.stores
    assert store.action == KEEP and store.old_name == "KSTREAM-AGGREGATE-STATE-STORE-0000000002"
    assert store.name != store.old_name and not plan.unchanged
    assert "was written as KSTREAM-AGGREGATE-STATE-STORE-0000000002" in plan.text()


def test_state_from_before_stable_names_with_a_changed_topology_is_refused_whole():
    def app(extra: bool):
        b = StreamsBuilder()
        s = b.stream("in")
        if extra:
            s.filter(lambda k, v: v).to("out")
        s.group_by(lambda k, v: v).count()
        return b.build()

    plan = plan_upgrade(legacy_fingerprint(app(False)), topology_fingerprint(app(True)))
    assert "older streamtable" in plan.refused_whole
    assert "reset" in str(plan.refusal("app"))


def test_state_routed_with_the_old_internal_key_format_is_refused_whole():
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: v).count()
    topology = b.build()
    old = legacy_fingerprint(topology)
    del old["internal_keys"]
    plan = plan_upgrade(old, topology_fingerprint(topology))
    assert "keys of internal topics" in plan.refused_whole


def test_the_text_says_what_is_kept_rebuilt_and_dropped():
    plan = plan_upgrade(orders_app(), orders_app(alerts=True, per_region=True,
                                                 totals_name="sums"))
    text = plan.text("latest")
    assert "  customers: kept\n" in text
    assert "  per-region: new, empty, built from the next records on\n" in text
    assert "  totals: dropped (its state is deleted)\n" in text
    assert "  big-orders: new, written from the next records on\n" in text
    # the output is computed as before, but through a store built anew
    assert "  totals-out: kept, through the new store sums\n" in text
    dropped = plan_upgrade(orders_app(), orders_app(drop_totals=True)).text()
    assert "  totals-out: no longer written\n" in dropped
