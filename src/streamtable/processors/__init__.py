"""Record-at-a-time operators shared by every driver."""

from streamtable.processors.api import Change, Processor, Record

__all__ = ["Change", "Processor", "Record"]
