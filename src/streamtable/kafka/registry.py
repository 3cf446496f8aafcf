"""A development Schema Registry: the part of Confluent's REST API that confluent-kafka's
``SchemaRegistryClient`` and its Avro, JSON Schema and Protobuf serializers use, in memory.

It is to Confluent Schema Registry what the development broker is to Kafka: something to
develop and test against on one machine, started in milliseconds, forgetting everything when it
stops. Nothing of it is needed with a real registry.

>>> with DevelopmentRegistry() as registry:                    # doctest: +SKIP
...     client = SchemaRegistryClient({"url": registry.url})

From a shell (runs until interrupted)::

    streamtable registry --port 8081

What it serves (JSON bodies, ``application/vnd.schemaregistry.v1+json``)::

    POST   /subjects/{subject}/versions        register a schema: {"id": ...} (the same id for
                                               the same schema, in any subject)
    POST   /subjects/{subject}                 look a schema up in a subject
    GET    /subjects                           subjects (?deleted=true: soft-deleted too)
    GET    /subjects/{subject}/versions        version numbers
    GET    /subjects/{subject}/versions/{v}    one version, or ``latest``
    DELETE /subjects/{subject}[/versions/{v}]  soft delete (?permanent=true: then for good)
    GET    /schemas/ids/{id}                   a schema by id (/subjects, /versions: where used)
    GET    /schemas/types                      ["AVRO", "JSON", "PROTOBUF"]
    GET|PUT|DELETE /config[/{subject}]         compatibility level (stored, not enforced)
    GET    /mode[/{subject}]                   READWRITE

Errors are Confluent's: ``{"error_code": 40401, "message": ...}`` for an unknown subject, 40402
for an unknown version, 40403 for an unknown schema, 42201 for an invalid schema, 42202 for an
invalid version.

What differs from Confluent's server: no compatibility checks (every new schema is accepted as
a new version, whatever ``/config`` says, and ``/compatibility/...`` is not served: 404), no
contexts, modes, exporters, rule sets or schema GUIDs; Protobuf schemas are kept as the client
sent them (the Python client sends a base64 ``FileDescriptorProto``, which it also asks for
back) and never converted to or from ``.proto`` text; nothing is persisted.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

logger = logging.getLogger(__name__)

__all__ = ["DevelopmentRegistry", "RegistryError", "run_registry_forever", "CONTENT_TYPE"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE", "NONE")


class RegistryError(Exception):
    """An error answer: HTTP status, Confluent's error code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def _schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


@dataclass
class _Schema:
    id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]]

    def body(self) -> dict[str, Any]:
        """Confluent's form: ``schemaType`` left out for Avro, ``references`` when there are."""
        out: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out


@dataclass
class _Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class _Subject:
    versions: list[_Version] = field(default_factory=list)
    compatibility: str | None = None

    def live(self) -> list[_Version]:
        return [v for v in self.versions if not v.deleted]


class _Store:
    """The registry's state and the meaning of every request, apart from HTTP."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: dict[int, _Schema] = {}
        self.ids: dict[tuple[str, str, str], int] = {}   # (type, canonical text, references)
        self.subjects: dict[str, _Subject] = {}
        self.compatibility = "BACKWARD"

    # -- schemas -------------------------------------------------------------------------
    @staticmethod
    def _parse(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the body must be "
                                            '{"schema": "...", "schemaType": ..., ...}')
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type!r}; expected "
                                            f"one of {', '.join(SCHEMA_TYPES)}")
        references = body.get("references") or []
        if not isinstance(references, list):
            raise RegistryError(422, 42201, "Invalid schema: references must be a list")
        return schema_type, body["schema"], references

    def _check(self, schema_type: str, text: str, references: list[dict[str, Any]]) -> str:
        """The canonical text of a valid schema (the key of its id); 42201 otherwise."""
        for ref in references:
            version = self._version(str(ref.get("subject")), str(ref.get("version")))
            if version is None:
                raise RegistryError(422, 42201, f"Invalid schema: reference {ref!r} names no "
                                                "registered subject version")
        if schema_type == "PROTOBUF":
            return text
        try:
            parsed = json.loads(text)
        except ValueError as e:
            raise RegistryError(422, 42201, f"Invalid schema: not JSON ({e})") from None
        if schema_type == "AVRO" and not references:
            try:
                import fastavro

                fastavro.parse_schema(parsed)
            except ImportError:  # pragma: no cover - fastavro comes with the registry extra
                pass
            except Exception as e:
                raise RegistryError(422, 42201, f"Invalid schema: {e}") from None
        return json.dumps(parsed, separators=(",", ":"), sort_keys=True)

    def _id_of(self, schema_type: str, text: str, references: list[dict[str, Any]],
               create: bool) -> int | None:
        canonical = self._check(schema_type, text, references)
        key = (schema_type, canonical, json.dumps(references, sort_keys=True))
        found = self.ids.get(key)
        if found is None and create:
            found = len(self.schemas) + 1
            self.ids[key] = found
            self.schemas[found] = _Schema(found, schema_type, text, references)
        return found

    def schema(self, schema_id: str) -> _Schema:
        try:
            return self.schemas[int(schema_id)]
        except (ValueError, KeyError):
            raise _schema_not_found(f"Schema {schema_id} not found") from None

    # -- subjects ------------------------------------------------------------------------
    def subject(self, name: str, deleted: bool = False) -> _Subject:
        found = self.subjects.get(name)
        if found is None or not (deleted or found.live()):
            raise _subject_not_found(name)
        return found

    def _version(self, subject: str, version: str, deleted: bool = False) -> _Version | None:
        found = self.subjects.get(subject)
        if found is None:
            return None
        versions = found.versions if deleted else found.live()
        if version in ("latest", "-1"):
            return versions[-1] if versions else None
        return next((v for v in versions if str(v.version) == version), None)

    def version(self, subject: str, version: str, deleted: bool = False) -> _Version:
        self.subject(subject, deleted)
        if version not in ("latest", "-1"):
            try:
                if int(version) < 1:
                    raise ValueError
            except ValueError:
                raise RegistryError(422, 42202, f"The specified version '{version}' is not a "
                                                "valid version id. Allowed values are between "
                                                "[1, 2^31-1] and the string \"latest\"") from None
        found = self._version(subject, version, deleted)
        if found is None:
            raise RegistryError(404, 40402, f"Version {version} not found.")
        return found

    def version_body(self, subject: str, v: _Version) -> dict[str, Any]:
        return {"subject": subject, "version": v.version, "id": v.schema_id,
                **self.schemas[v.schema_id].body()}

    def register(self, subject: str, body: Any) -> dict[str, Any]:
        schema_type, text, references = self._parse(body)
        schema_id = self._id_of(schema_type, text, references, create=True)
        assert schema_id is not None
        entry = self.subjects.setdefault(subject, _Subject())
        for v in entry.live():
            if v.schema_id == schema_id:   # already a version of the subject: the same answer
                return {"id": schema_id, "version": v.version, "subject": subject}
        number = max((v.version for v in entry.versions), default=0) + 1
        entry.versions.append(_Version(number, schema_id))
        logger.info("registered schema %d as %s version %d", schema_id, subject, number)
        return {"id": schema_id, "version": number, "subject": subject}

    def lookup(self, subject: str, body: Any, deleted: bool) -> dict[str, Any]:
        entry = self.subject(subject, deleted)
        schema_type, text, references = self._parse(body)
        schema_id = self._id_of(schema_type, text, references, create=False)
        for v in entry.versions if deleted else entry.live():
            if v.schema_id == schema_id:
                return self.version_body(subject, v)
        raise _schema_not_found()

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        entry = self.subject(subject, deleted=True)
        if permanent:
            if entry.live():
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first "
                                                "before being permanently deleted")
            del self.subjects[subject]
            return [v.version for v in entry.versions]
        live = entry.live()
        if not live:
            raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set "
                                            "permanent=true to delete permanently")
        for v in live:
            v.deleted = True
        return [v.version for v in live]

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        v = self.version(subject, version, deleted=permanent)
        if permanent:
            if not v.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {v.version} was "
                                                "not deleted first before being permanently "
                                                "deleted")
            self.subjects[subject].versions.remove(v)
        else:
            v.deleted = True
        return v.version

    def used_by(self, schema_id: str, deleted: bool) -> list[dict[str, Any]]:
        found = self.schema(schema_id).id
        return [{"subject": name, "version": v.version}
                for name, entry in sorted(self.subjects.items())
                for v in entry.versions if v.schema_id == found and (deleted or not v.deleted)]

    # -- compatibility configuration ----------------------------------------------------------
    @staticmethod
    def level(body: Any) -> str:
        level = str((body or {}).get("compatibility") or "").upper()
        if level not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level {level!r}; expected "
                                            f"one of {', '.join(COMPATIBILITY_LEVELS)}")
        return level


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return (query.get(name) or ["false"])[-1].lower() == "true"


def route(store: _Store, method: str, parts: list[str], query: dict[str, list[str]],
          body: Any) -> Any:
    """The answer to one request (a JSON value), or :class:`RegistryError`."""
    deleted = _flag(query, "deleted")
    match (method, parts):
        case ("GET", []):
            return {}
        case ("GET", ["subjects"]):
            return sorted(name for name, s in store.subjects.items()
                          if s.versions and (deleted or s.live()))
        case ("GET", ["subjects", subject, "versions"]):
            entry = store.subject(subject, deleted)
            return [v.version for v in (entry.versions if deleted else entry.live())]
        case ("POST", ["subjects", subject, "versions"]):
            return store.register(subject, body)
        case ("POST", ["subjects", subject]):
            return store.lookup(subject, body, deleted)
        case ("DELETE", ["subjects", subject]):
            return store.delete_subject(subject, _flag(query, "permanent"))
        case ("GET", ["subjects", subject, "versions", version]):
            return store.version_body(subject, store.version(subject, version, deleted))
        case ("GET", ["subjects", subject, "versions", version, "schema"]):
            v = store.version(subject, version, deleted)
            return json.loads(store.schemas[v.schema_id].schema)
        case ("DELETE", ["subjects", subject, "versions", version]):
            return store.delete_version(subject, version, _flag(query, "permanent"))
        case ("GET", ["schemas", "types"]):
            return list(SCHEMA_TYPES)
        case ("GET", ["schemas", "ids", schema_id]):
            return store.schema(schema_id).body()
        case ("GET", ["schemas", "ids", schema_id, "schema"]):
            return json.loads(store.schema(schema_id).schema)
        case ("GET", ["schemas", "ids", schema_id, "subjects"]):
            return sorted({u["subject"] for u in store.used_by(schema_id, deleted)})
        case ("GET", ["schemas", "ids", schema_id, "versions"]):
            return store.used_by(schema_id, deleted)
        case ("GET", ["config"]):
            return {"compatibilityLevel": store.compatibility}
        case ("PUT", ["config"]):
            store.compatibility = store.level(body)
            return {"compatibility": store.compatibility}
        case ("GET", ["config", subject]):
            configured = store.subjects.get(subject)
            if configured is not None and configured.compatibility is not None:
                return {"compatibilityLevel": configured.compatibility}
            if _flag(query, "defaultToGlobal"):
                return {"compatibilityLevel": store.compatibility}
            raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level "
                                            "compatibility configured")
        case ("PUT", ["config", subject]):
            store.subjects.setdefault(subject, _Subject()).compatibility = store.level(body)
            return {"compatibility": store.subjects[subject].compatibility}
        case ("DELETE", ["config", subject]):
            configured = store.subjects.get(subject)
            if configured is None or configured.compatibility is None:
                raise _subject_not_found(subject)
            level, configured.compatibility = configured.compatibility, None
            return {"compatibilityLevel": level}
        case ("GET", ["mode"]) | ("GET", ["mode", _]):
            return {"mode": "READWRITE"}
        case ("GET", ["contexts"]):
            return ["."]
    raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(parts)} is not "
                                  "served by the development registry")


class _Handler(BaseHTTPRequestHandler):
    server_version = "streamtable-registry"
    protocol_version = "HTTP/1.1"   # keep-alive: the client reuses its connection
    store: _Store                   # set on the subclass made per server

    def _answer(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        # the client percent-encodes every character of a subject, "/" included
        parts = [unquote(p) for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                raise RegistryError(400, 400, "the request body is not JSON") from None
            with self.store.lock:
                answer = route(self.store, self.command, parts, query, body)
        except RegistryError as e:
            self._answer(e.status, {"error_code": e.code, "message": e.message})
            return
        except Exception as e:  # a bug here must still answer as the registry would
            logger.exception("development registry: %s %s", self.command, self.path)
            self._answer(500, {"error_code": 50001, "message": f"Error in the backend: {e}"})
            return
        self._answer(HTTPStatus.OK, answer)

    do_GET = do_POST = do_PUT = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("development registry: " + format, *args)


class DevelopmentRegistry:
    """The development Schema Registry on ``host:port`` (0: a free port), served from a
    background thread of this process; :attr:`url` is what ``schema.registry.url`` takes.

    >>> with DevelopmentRegistry() as registry:               # doctest: +SKIP
    ...     serde = AvroSerde(schema, registry.url)
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        handler = type("Handler", (_Handler,), {"store": _Store()})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> DevelopmentRegistry:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                            name="streamtable-registry")
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> DevelopmentRegistry:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DevelopmentRegistry({self.url!r})"


def run_registry_forever(port: int = 8081, *, host: str = "127.0.0.1",
                         stop_event: threading.Event | None = None) -> None:
    """Serve the development registry in the foreground until SIGINT/SIGTERM or ``stop_event``.

    >>> run_registry_forever(8081)                           # doctest: +SKIP
    """
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    with DevelopmentRegistry(port, host) as registry:
        logger.info("development schema registry listening: schema.registry.url=%s",
                    registry.url)
        stop.wait()


def main(argv: list[str] | None = None) -> int:
    """``python -m streamtable.kafka.registry [--port N]``."""
    parser = argparse.ArgumentParser(prog="python -m streamtable.kafka.registry",
                                     description="Run an in-memory development Schema Registry.")
    parser.add_argument("--port", type=int, default=8081, help="TCP port (0 = a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run_registry_forever(args.port, host=args.host)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
