"""Restarting with a renamed store: the old store is dropped and the new name built from the
earliest offsets; `streamtable reset` still starts the whole application again."""

from __future__ import annotations

import pytest
from tests.runtime.spark.kafka_util import new_topics, produce

from streamtable.cli import main
from streamtable.runtime.spark.app import StreamsApp

pytestmark = pytest.mark.spark

APP = '''
from streamtable import StreamsBuilder
config = {{"default.key.serde": "string", "default.value.serde": "string"}}
def build_topology(store="counts"):
    b = StreamsBuilder()
    (b.stream({src!r}).flat_map_values(lambda line: line.split())
     .group_by(lambda k, w: w).count(materialized=store))
    return b.build()
'''


def test_a_renamed_store_is_built_under_its_new_name_then_reset_starts_again(spark, bootstrap,
                                                                            tmp_path):
    from streamtable.cli import load_app

    (src,) = new_topics(bootstrap, 2, "topo-lines")
    file = tmp_path / "topo_app.py"
    file.write_text(APP.format(src=src))
    module = load_app(str(file))
    state, app_id = tmp_path / "state", f"topo-{src}"

    def app(store: str) -> StreamsApp:
        return StreamsApp(module.build_topology(store), app_id, bootstrap, state_dir=state,
                          spark=spark, config=module.config, development_broker=True)

    produce(bootstrap, src, [(None, b"a b a")])
    first = app("counts")
    first.run_until_caught_up(timeout=120)
    assert first.store("counts").to_dict() == {"a": 2, "b": 1}
    renamed = app("totals")
    renamed.run_until_caught_up(timeout=120)
    assert renamed.store("totals").to_dict() == {"a": 2, "b": 1}  # built from the start, once
    assert "counts" not in renamed.serving.stores()  # the old name's state is dropped
    assert main(["reset", str(file), "--state-dir", str(state), "--application-id", app_id]) == 0
    again = app("totals")
    again.run_until_caught_up(timeout=120)
    assert again.store("totals").to_dict() == {"a": 2, "b": 1}  # from the start, once
