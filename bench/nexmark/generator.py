"""A seeded Nexmark event generator, written from the specification of the ``nexmark/nexmark``
(Flink) and Apache Beam generators: persons, auctions and bids in the proportions 1 : 3 : 46,
with their fields and distributions.

Event ``i`` (0-based) is, by ``i % 50``: a person (0), an auction (1-3) or a bid (4-49). Its
event time is ``base_time + i * 1000 // rate`` ms (``rate`` events per second of event time),
so events are in event-time order. What the spec fixes and this generator keeps:

* ids: persons and auctions are numbered from 1000 in order (person ``1000 + i // 50``,
  auction ``1000 + 3 * (i // 50) + i % 50 - 1``), categories are 10-14;
* an auction's seller is, 3 times in 4 (``hotSellersRatio`` 4), the "hot" seller (the first
  person of the latest block of 100), else one of the last 1,000 persons or up to 10 ahead;
* a bid's auction is, 1 time in 2 (``hotAuctionRatio`` 2), the hot auction (the first of the
  latest block of 100 auctions), else one of the last 100 auctions or up to 10 ahead; its bidder
  is, 3 times in 4 (``hotBiddersRatio`` 4), the hot bidder (the second person of the latest
  block of 100), else one of the last 1,000 persons or up to 10 ahead. A reference "ahead" names
  an id that the generator makes a few events later (the spec's ``*_ID_LEAD``): within a run
  every reference names an id made before it or at most 10 ids later;
* prices ``round(100 * 10 ** (6 u))`` for uniform ``u`` (1 to 100,000,000 cents, log-uniform);
  an auction's reserve is its initial bid plus another such price;
* an auction's ``expires`` is its event time plus 1 + a uniform number of ms below twice the
  time the generator takes to make 100 more auctions (``numInFlightAuctions``);
* a bid's channel is, 1 time in 2, one of Google, Facebook, Baidu, Apple (each with a fixed
  URL), else ``channel-N`` for N below 10,000 with its own URL, 9 in 10 of which end in
  ``&channel_id=<N's 32 bits reversed>``;
* names from 11 first and 9 last names, 10 US cities, 6 states, random lower-case strings with
  spaces (or ``_`` in URLs) 1 time in 13, credit cards of four 4-digit groups, and ``extra``
  padding of random letters that brings the average record to 200 (person), 500 (auction) and
  100 (bid) bytes of payload, within +-20%.

Differences from the Java code, on purpose: random strings are cut from a seeded pool of
characters instead of drawn character by character (same character distribution, far faster
in Python), and a bid's bidder gets the 1000 offset once (the Flink copy adds it twice, so its
bidders are not person ids; Beam adds it once).

Randomness comes from numpy, one generator per chunk of :data:`CHUNK` events seeded with
``(seed, chunk)``, so the first k events are the same whatever the total, and the same seed
gives the same events on every machine.

>>> gen = Generator(seed=1, rate=10_000)
>>> batch = next(gen.batches(100))
>>> [len(batch.persons), len(batch.auctions), len(batch.bids)]
[2, 6, 92]
>>> batch.persons[0]["id"], batch.auctions[0]["id"], batch.auctions[0]["category"] in range(10, 15)
(1000, 1000, True)
>>> batch.bids[-1]["dateTime"] - batch.persons[0]["dateTime"]
9
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
#: hot sellers, bidders and auctions are the first (bidders: second) of blocks of this many
HOT_BLOCK = 100
HOT_AUCTION_RATIO = 2
HOT_SELLERS_RATIO = 4
HOT_BIDDERS_RATIO = 4
NUM_IN_FLIGHT_AUCTIONS = 100
NUM_ACTIVE_PEOPLE = 1000
AVG_PERSON_BYTES = 200
AVG_AUCTION_BYTES = 500
AVG_BID_BYTES = 100
CHANNELS = 10_000
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")

#: 2015-07-15T00:00:00Z, Beam's Nexmark base time: the default first event time
BASE_TIME_MS = 1_436_918_400_000
#: the spec configuration's default rate (events per second of event time)
DEFAULT_RATE = 10_000
#: events per chunk; each chunk has its own seeded random generator
CHUNK = 50_000
#: the side input of q13: ``key -> str(key)`` for keys below this
SIDE_INPUT_ROWS = 10_000

_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
_POOL = 1 << 20


def _pool(rng: np.random.Generator, special: bytes | None) -> str:
    """A pool of random lower-case letters, with ``special`` 1 time in 13."""
    chars = _LETTERS[rng.integers(0, 26, _POOL)]
    if special is not None:
        chars[rng.integers(0, 13, _POOL) == 0] = special[0]
    return chars.tobytes().decode()


def _reverse32(n: int) -> int:
    """Java's ``Math.abs(Integer.reverse(n))``."""
    r = int(f"{n:032b}"[::-1], 2)
    if r >= 1 << 31:
        r -= 1 << 32
    return abs(r)


@dataclass
class Batch:
    """The events of one chunk, in event order per type (dicts with the standard field names)."""

    persons: list[dict[str, Any]] = field(default_factory=list)
    auctions: list[dict[str, Any]] = field(default_factory=list)
    bids: list[dict[str, Any]] = field(default_factory=list)


class Generator:
    """Nexmark events for ``seed``, ``rate`` events/s of event time from ``base_time`` ms."""

    def __init__(self, seed: int = 42, rate: int = DEFAULT_RATE,
                 base_time: int = BASE_TIME_MS) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.seed = seed
        self.rate = rate
        self.base_time = base_time
        rng = np.random.default_rng([seed, 1 << 40])
        self._words = _pool(rng, b" ")
        self._url_words = _pool(rng, b"_")
        self._extra = _pool(rng, None)
        self.hot_urls = [self._base_url(rng) for _ in HOT_CHANNELS]
        self.channel_urls = []
        for n in range(CHANNELS):
            url = self._base_url(rng)
            if rng.integers(0, 10) > 0:
                url += f"&channel_id={_reverse32(n)}"
            self.channel_urls.append(url)

    # ------------------------------------------------------------------------ spec helpers

    def timestamp(self, event: int | np.ndarray) -> Any:
        """The event time (ms) of event number ``event``."""
        return self.base_time + event * 1000 // self.rate

    def max_auction_length_ms(self) -> int:
        """An upper bound of ``expires - dateTime`` over every auction."""
        events = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION
        return 2 * (events * 1000 // self.rate + 1) + 1

    def max_bid_distance_ms(self) -> tuple[int, int]:
        """``(before, after)``: a bid's event time is at most ``before`` ms before its auction's
        (a reference ahead) and at most ``after`` ms after it (an auction still in flight)."""
        back = (NUM_IN_FLIGHT_AUCTIONS // AUCTION_PROPORTION + 2) * TOTAL_PROPORTION
        ahead = (AUCTION_ID_LEAD // AUCTION_PROPORTION + 2) * TOTAL_PROPORTION
        return ahead * 1000 // self.rate + 1, back * 1000 // self.rate + 1

    def _base_url(self, rng: np.random.Generator) -> str:
        parts = [self._string(rng, 5, self._url_words) for _ in range(3)]
        return "https://www.nexmark.com/" + "/".join(parts) + "/item.htm?query=1"

    @staticmethod
    def _string(rng: np.random.Generator, max_len: int, pool: str) -> str:
        n = 3 + int(rng.integers(0, max_len - 3))
        at = int(rng.integers(0, len(pool) - n))
        return pool[at:at + n].strip()

    def _strings(self, rng: np.random.Generator, count: int, max_len: int,
                 pool: str) -> list[str]:
        lengths = 3 + rng.integers(0, max_len - 3, count)
        starts = rng.integers(0, len(pool) - max_len, count)
        return [pool[a:a + n].strip() for a, n in zip(starts.tolist(), lengths.tolist(),
                                                       strict=True)]

    def _extras(self, rng: np.random.Generator, sizes: np.ndarray, average: int) -> list[str]:
        """Padding so that ``size + len(extra)`` averages ``average`` (+-20%)."""
        want = np.maximum(average - sizes, 0)
        delta = np.round(want * 0.2).astype(np.int64)
        span = np.maximum(2 * delta, 1)
        lengths = want - delta + np.where(delta > 0, rng.integers(0, span), 0)
        starts = rng.integers(0, len(self._extra) - 2 * average, len(sizes))
        pool = self._extra
        return [pool[a:a + n] for a, n in zip(starts.tolist(), lengths.tolist(), strict=True)]

    @staticmethod
    def _prices(rng: np.random.Generator, count: int) -> np.ndarray:
        return np.floor(10.0 ** (rng.random(count) * 6.0) * 100.0 + 0.5).astype(np.int64)

    @staticmethod
    def _next_person(rng: np.random.Generator, last_person: np.ndarray) -> np.ndarray:
        """A random base-0 person among the active ones, or up to 10 ahead."""
        people = last_person + 1
        active = np.minimum(people, NUM_ACTIVE_PEOPLE)
        return people - active + rng.integers(0, active + PERSON_ID_LEAD)

    # ---------------------------------------------------------------------------- batches

    def batches(self, events: int, start: int = 0) -> Iterator[Batch]:
        """The events ``start .. events - 1``, one :class:`Batch` per chunk (``start`` must be a
        multiple of :data:`CHUNK`)."""
        if start % CHUNK:
            raise ValueError(f"start must be a multiple of {CHUNK}")
        for first in range(start, events, CHUNK):
            yield self.batch(first, min(first + CHUNK, events))

    def batch(self, first: int, end: int) -> Batch:
        rng = np.random.default_rng([self.seed, first // CHUNK])
        ids = np.arange(first, first + CHUNK, dtype=np.int64)
        rem = ids % TOTAL_PROPORTION
        epoch = ids // TOTAL_PROPORTION
        times = self.timestamp(ids)
        last_person = epoch  # one person per epoch, at offset 0
        # the last auction made at or before each event (offsets 1-3 make auctions)
        last_auction = np.where(rem == 0, epoch * AUCTION_PROPORTION - 1,
                                epoch * AUCTION_PROPORTION + np.minimum(rem, 3) - 1)
        # the whole chunk is drawn, whatever ``end``: the first k events of every run are the
        # same (a chunk draws its randomness per event type, for all of the chunk's events)
        out = Batch()
        p = np.flatnonzero(rem < PERSON_PROPORTION)
        a = np.flatnonzero((rem >= PERSON_PROPORTION)
                           & (rem < PERSON_PROPORTION + AUCTION_PROPORTION))
        b = np.flatnonzero(rem >= PERSON_PROPORTION + AUCTION_PROPORTION)
        kept = end - first
        out.persons = self._persons(rng, last_person[p], times[p])[:int((p < kept).sum())]
        out.auctions = self._auctions(rng, ids[a], last_person[a], last_auction[a],
                                      times[a])[:int((a < kept).sum())]
        out.bids = self._bids(rng, last_person[b], last_auction[b],
                              times[b])[:int((b < kept).sum())]
        return out

    def _persons(self, rng: np.random.Generator, base0: np.ndarray,
                 times: np.ndarray) -> list[dict[str, Any]]:
        n = len(base0)
        first = rng.integers(0, len(FIRST_NAMES), n).tolist()
        last = rng.integers(0, len(LAST_NAMES), n).tolist()
        names = [f"{FIRST_NAMES[f]} {LAST_NAMES[s]}" for f, s in zip(first, last, strict=True)]
        users = self._strings(rng, n, 7, self._words)
        domains = self._strings(rng, n, 5, self._words)
        emails = [f"{u}@{d}.com" for u, d in zip(users, domains, strict=True)]
        cards = rng.integers(0, 10_000, (n, 4)).tolist()
        credit = [f"{c[0]:04d} {c[1]:04d} {c[2]:04d} {c[3]:04d}" for c in cards]
        cities = [US_CITIES[c] for c in rng.integers(0, len(US_CITIES), n).tolist()]
        states = [US_STATES[s] for s in rng.integers(0, len(US_STATES), n).tolist()]
        sizes = np.array([8 + len(names[j]) + len(emails[j]) + 19 + len(cities[j]) + 2
                          for j in range(n)], dtype=np.int64)
        extras = self._extras(rng, sizes, AVG_PERSON_BYTES)
        ids = (base0 + FIRST_PERSON_ID).tolist()
        ts = times.tolist()
        return [{"id": ids[j], "name": names[j], "emailAddress": emails[j],
                 "creditCard": credit[j], "city": cities[j], "state": states[j],
                 "dateTime": ts[j], "extra": extras[j]} for j in range(n)]

    def _auctions(self, rng: np.random.Generator, events: np.ndarray, last_person: np.ndarray,
                  last_auction: np.ndarray, times: np.ndarray) -> list[dict[str, Any]]:
        n = len(events)
        hot = rng.integers(0, HOT_SELLERS_RATIO, n) > 0
        seller = np.where(hot, last_person // HOT_BLOCK * HOT_BLOCK,
                          self._next_person(rng, last_person)) + FIRST_PERSON_ID
        category = FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, n)
        initial = self._prices(rng, n)
        reserve = initial + self._prices(rng, n)
        ahead = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION
        horizon = self.timestamp(events + ahead) - times
        expires = times + 1 + rng.integers(0, np.maximum(2 * horizon, 1))
        names = self._strings(rng, n, 20, self._words)
        descriptions = self._strings(rng, n, 100, self._words)
        sizes = np.array([8 + len(names[j]) + len(descriptions[j]) + 40 for j in range(n)],
                         dtype=np.int64)
        extras = self._extras(rng, sizes, AVG_AUCTION_BYTES)
        ids = (last_auction + FIRST_AUCTION_ID).tolist()
        ts, ex, se, ca = times.tolist(), expires.tolist(), seller.tolist(), category.tolist()
        ib, rs = initial.tolist(), reserve.tolist()
        return [{"id": ids[j], "itemName": names[j], "description": descriptions[j],
                 "initialBid": ib[j], "reserve": rs[j], "dateTime": ts[j], "expires": ex[j],
                 "seller": se[j], "category": ca[j], "extra": extras[j]} for j in range(n)]

    def _bids(self, rng: np.random.Generator, last_person: np.ndarray,
              last_auction: np.ndarray, times: np.ndarray) -> list[dict[str, Any]]:
        n = len(times)
        hot = rng.integers(0, HOT_AUCTION_RATIO, n) > 0
        low = np.maximum(last_auction - NUM_IN_FLIGHT_AUCTIONS, 0)
        other = low + rng.integers(0, last_auction - low + 1 + AUCTION_ID_LEAD)
        auction = np.where(hot, last_auction // HOT_BLOCK * HOT_BLOCK, other) + FIRST_AUCTION_ID
        hot = rng.integers(0, HOT_BIDDERS_RATIO, n) > 0
        bidder = np.where(hot, last_person // HOT_BLOCK * HOT_BLOCK + 1,
                          self._next_person(rng, last_person)) + FIRST_PERSON_ID
        price = self._prices(rng, n)
        hot = (rng.integers(0, 2, n) > 0).tolist()
        which = rng.integers(0, len(HOT_CHANNELS), n).tolist()
        number = rng.integers(0, CHANNELS, n).tolist()
        extras = self._extras(rng, np.full(n, 32, dtype=np.int64), AVG_BID_BYTES)
        au, bi, pr, ts = auction.tolist(), bidder.tolist(), price.tolist(), times.tolist()
        hot_urls, urls = self.hot_urls, self.channel_urls
        out = []
        for j in range(n):
            if hot[j]:
                channel, url = HOT_CHANNELS[which[j]], hot_urls[which[j]]
            else:
                channel, url = f"channel-{number[j]}", urls[number[j]]
            out.append({"auction": au[j], "bidder": bi[j], "price": pr[j], "channel": channel,
                        "url": url, "dateTime": ts[j], "extra": extras[j]})
        return out

    def side_input(self) -> list[tuple[int, str]]:
        """q13's side input, as the spec's ``SideInputGenerator`` writes it: ``(i, str(i))``."""
        return [(i, str(i)) for i in range(SIDE_INPUT_ROWS)]
