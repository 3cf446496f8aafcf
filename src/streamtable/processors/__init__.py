"""Record-at-a-time operators shared by every driver."""

from streamtable.processors.api import Change, Processor, RawRecord, Record

__all__ = ["Change", "Processor", "RawRecord", "Record"]
