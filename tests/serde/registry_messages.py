"""Protobuf messages for the Schema Registry tests, built from their file descriptor as the
code ``protoc --python_out`` generates builds them (protoc is not a Python package), in a pool
of their own.

``PageView`` is the second message of its file (message index ``[1]``) and has a nested one, so
the wire format's message-index array is not the one-byte shortcut of the first message.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
PACKAGE = "streamtable.tests"


def file_descriptor(name: str = "streamtable_tests/pageviews.proto") -> bytes:
    """The serialized ``FileDescriptorProto`` of ``Click``, ``PageView`` and ``PageSummary``."""
    fdp = descriptor_pb2.FileDescriptorProto(name=name, package=PACKAGE, syntax="proto3")
    click = fdp.message_type.add(name="Click")
    click.field.add(name="user", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    view = fdp.message_type.add(name="PageView")
    referrer = view.nested_type.add(name="Referrer")
    referrer.field.add(name="host", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    view.field.add(name="user", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    view.field.add(name="url", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    view.field.add(name="seconds", number=3, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
    view.field.add(name="referrer", number=4, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                   type_name=f".{PACKAGE}.PageView.Referrer")
    summary = fdp.message_type.add(name="PageSummary")
    summary.field.add(name="user", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    summary.field.add(name="pages", number=2, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
    return fdp.SerializeToString()


_pool = descriptor_pool.DescriptorPool()
_pool.AddSerializedFile(file_descriptor())
Click = message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.Click"))
PageView = message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.PageView"))
PageSummary = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(f"{PACKAGE}.PageSummary"))


def generated_module(name: str) -> str:
    """The text of a ``<name>_pb2.py`` module as protoc writes it, for the same messages (in a
    file of its own name, so that it can join the default pool beside the others)."""
    data = file_descriptor(f"streamtable_tests/{name}.proto")
    return (
        "from google.protobuf import descriptor_pool as _descriptor_pool\n"
        "from google.protobuf.internal import builder as _builder\n"
        f"DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile({data!r})\n"
        "_globals = globals()\n"
        "_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)\n"
        f"_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, {name + '_pb2'!r}, _globals)\n"
    )
