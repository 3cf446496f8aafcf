"""A bid's fields in the order of the Nexmark schema (``SELECT *`` of a bid), and those q0
selects, for the queries, the Python peers and the checker alike.

>>> BID_FIELDS[0], len(BID_FIELDS)
('auction', 7)
"""

BID_FIELDS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")
#: what q0 (passthrough) selects of a bid
Q0_FIELDS = ("auction", "bidder", "price", "dateTime", "extra")
