"""`streamtable describe --diff OLD NEW`: what deploying NEW over OLD's state keeps, rebuilds
and drops, before deploying."""

from __future__ import annotations

from pathlib import Path

from streamtable.cli import main

APP = '''
from streamtable import StreamsBuilder
config = {{"application.id": "orders"}}
def build_topology():
    b = StreamsBuilder()
    orders = b.stream("orders"){filter}
    {branch}
    orders.group_by(lambda k, o: o["customer"]).count("per-customer").to_stream().to("counts")
    {extra}
    return b.build()
'''


def _app(tmp_path: Path, name: str, *, branch: str = "", extra: str = "",
         filter: str = "") -> str:
    file = tmp_path / f"{name}.py"
    file.write_text(APP.format(branch=branch, extra=extra, filter=filter))
    return str(file)


def test_diff_says_what_is_kept_new_and_dropped_per_store_and_output(tmp_path, capsys):
    old = _app(tmp_path, "v1", extra='orders.group_by_key().count("per-order")')
    new = _app(tmp_path, "v2",
               branch='orders.filter(lambda k, o: o["amount"] > 100).to("big-orders")',
               extra='orders.group_by(lambda k, o: o["region"]).count("per-region")')
    assert main(["describe", "--diff", old, new]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Upgrading orders from {old} to {new} (new state from: earliest):\n")
    assert "  per-customer: kept\n" in out
    assert "  per-region: new, built from the earliest offsets of its input topics\n" in out
    assert "  per-order: dropped (its state is deleted)\n" in out
    assert "  big-orders: new, written from the earliest offsets of its input topics\n" in out
    assert "  counts: kept\n" in out
    assert "would be refused" not in out
    assert main(["describe", "--diff", old, new,
                 "--config", "upgrade.new.state.from=latest"]) == 0
    assert "  per-region: new, empty, built from the next records on\n" in capsys.readouterr().out


def test_diff_of_a_store_whose_upstream_changed_says_the_start_would_be_refused(tmp_path,
                                                                                capsys):
    old = _app(tmp_path, "v1")
    new = _app(tmp_path, "v2", filter='.filter(lambda k, o: o["amount"] > 0)')
    assert main(["describe", "--diff", old, new]) == 1
    out = capsys.readouterr().out
    assert "  per-customer: cannot be kept: the operators, topics or serdes upstream" in out
    assert "  counts: computed another way from the next record on" in out
    assert "The start would be refused: the new version of orders cannot keep the state of " \
           "store 'per-customer'" in out
    assert f"`streamtable reset {new} --store per-customer`" in out
