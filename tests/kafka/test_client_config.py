"""Kafka security settings reach every client the application creates, and secrets never show.

Every factory is checked with real librdkafka clients: ``sasl.mechanism=BOGUS`` makes a client's
constructor fail ("Unsupported SASL mechanism"), so a client that does not carry the settings
would be built without error.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from streamtable import StreamsBuilder
from streamtable.config import ConfigError, StreamsConfig, kafka_client_config, redacted
from streamtable.kafka.admin import (
    KafkaAdminError,
    ensure_topics,
    list_topic_names,
    partition_counts,
)
from streamtable.kafka.sink import SinkRecord, _TailScanner, produce_rows, warm_up_producer
from streamtable.runtime.spark.app import StreamsApp
from streamtable.runtime.spark.kafka_source import KafkaInputPartition, KafkaStreamReader

SECRET = "pw-SENTINEL-93f1"
BOGUS = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "BOGUS",
         "sasl.username": "me", "sasl.password": SECRET}
NOWHERE = "127.0.0.1:1"
UNSUPPORTED = "Unsupported SASL mechanism: BOGUS"


def _app(tmp_path, extra=None) -> StreamsApp:
    builder = StreamsBuilder()
    builder.stream("in").map_values(lambda v: v).to("out")
    return StreamsApp(builder.build(), "sec", NOWHERE, state_dir=tmp_path,
                      config={**BOGUS, **(extra or {})})


def test_the_client_config_takes_security_keys_and_kafka_prefixed_ones():
    cfg = StreamsConfig({"bootstrap.servers": "b:1", "security.protocol": "SSL",
                         "ssl.ca.location": "/ca.pem", "sasl.oauthbearer.method": "oidc",
                         "kafka.client.id": "billing", "kafka.socket.timeout.ms": 5000,
                         "commit.interval.ms": 10})
    assert kafka_client_config(cfg) == {
        "bootstrap.servers": "b:1", "security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
        "sasl.oauthbearer.method": "oidc", "client.id": "billing", "socket.timeout.ms": 5000}
    assert cfg.kafka_client_config == kafka_client_config(cfg)
    # anything else is still a misspelt setting
    with pytest.raises(ConfigError, match="kafka.<librdkafka key>"):
        StreamsConfig({"securty.protocol": "SSL"})


def test_secrets_are_redacted_in_repr_and_messages():
    cfg = StreamsConfig({**BOGUS, "ssl.key.password": SECRET, "ssl.keystore.password": SECRET,
                         "kafka.sasl.oauthbearer.client.secret": SECRET, "ssl.key.pem": SECRET})
    assert SECRET not in repr(cfg) and SECRET not in str(cfg)
    assert SECRET not in repr(cfg.redacted())
    assert "'sasl.username': 'me'" in repr(cfg)  # what is not secret stays readable
    assert redacted({"ssl.key.password": SECRET}) == {"ssl.key.password": "********"}
    url = StreamsConfig({"serving.url": f"postgresql://app:{SECRET}@db:5432/x"})
    assert SECRET not in repr(url) and "postgresql://app:********@db:5432/x" in repr(url)


def test_admin_helpers_carry_the_settings():
    for call in (lambda: partition_counts(NOWHERE, ["t"], client_config=BOGUS),
                 lambda: ensure_topics(NOWHERE, {"t": 1}, client_config=BOGUS),
                 lambda: list_topic_names(NOWHERE, client_config=BOGUS)):
        with pytest.raises(KafkaAdminError, match=UNSUPPORTED) as info:
            call()
        assert str(info.value).startswith(f"cannot create a Kafka client for {NOWHERE}: ")
        assert SECRET not in str(info.value)


def test_the_app_topic_setup_and_its_producers_carry_the_settings(tmp_path):
    app = _app(tmp_path)
    with pytest.raises(KafkaAdminError, match=UNSUPPORTED):
        app.prepare()  # partition counts and topic creation, on the driver
    output = app._output_writer()
    assert output.client_config == kafka_client_config(app.config)
    assert SECRET not in repr(output)
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        output.write(0, [{"topic": "out", "key": b"k", "value": b"v", "partition": 0}])
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        warm_up_producer(NOWHERE, client_config=output.client_config)


def test_the_sink_producer_and_tail_scan_consumer_carry_the_settings():
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        produce_rows(NOWHERE, [SinkRecord("out", b"k", b"v", partition=0)], 0, "app",
                     client_config=BOGUS)
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        _TailScanner(NOWHERE, BOGUS, "app", "0", 0, 100, 1.0)


def test_the_source_planner_and_readers_carry_the_settings(tmp_path):
    app = _app(tmp_path, {"kafka.client.id": "billing"})
    plan = app.prepare({"in": 1})
    options = app.source_options(plan)
    assert options["kafka.client.id"] == "billing"
    assert options["kafka.sasl.password"] == SECRET  # Spark redacts it in plans (spark test)
    reader = KafkaStreamReader(options)
    assert reader._client_conf()["client.id"] == "billing"
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        reader._admin_client()  # driver-side planning
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        reader.development_profile = True
        reader._probe_end_offsets_via_fetch({"in": {"0": 0}})
    # executors: the stages read their ranges themselves, and a source in read.mode=records
    # reads the records in its own tasks
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        list(app._micro_batches().range_reader().read("in", 0, 0, 1))
    records_mode = KafkaStreamReader({**options, "read.mode": "records"})
    with pytest.raises(KafkaException, match=UNSUPPORTED):
        list(records_mode.read(KafkaInputPartition("in", 0, 0, 1)))
